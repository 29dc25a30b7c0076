// The events the corpus injects, one per session, each with the cause the analyzer must name (or none),
// and the control with no event. The lists live in their own files by kind.

import { chainEvents } from './chain-events.js';
import { messageEvents, paramEvents, resumeEvent, systemEvents, toolEvents } from './edit-events.js';
import { always, type EventDef, linear, session } from './event-shapes.js';
import { forkEvents } from './line-events.js';
import { lineageEvents } from './lineage-events.js';
import { concurrencyEvents, timeEvents } from './time-events.js';
import { wireEvents } from './wire-events.js';

export type { EventDef, SessionSpec } from './event-shapes.js';

export const CONTROL: EventDef = {
  name: 'control',
  applies: always,
  build: (spec) => linear(session(spec, 'control'), undefined),
};

export const EVENTS: readonly EventDef[] = [
  ...toolEvents,
  ...systemEvents,
  ...messageEvents,
  ...paramEvents,
  ...timeEvents,
  ...concurrencyEvents,
  ...forkEvents,
  ...wireEvents,
  ...chainEvents,
  resumeEvent,
  ...lineageEvents,
];
