// StepQueue runs queued stepped jobs one after another, in order, whoever drives them.
// Pure: no timer, no clock.

import { describe, expect, it } from 'vitest';
import { StepQueue } from './step-queue.js';
import { drainSteps } from './steps.js';

function* job(name: string, pieces: number, log: string[]): Generator<void, string> {
  for (let i = 0; i < pieces; i++) {
    log.push(`${name}${i}`);
    yield;
  }
  return name;
}

describe('StepQueue', () => {
  it('runs jobs one after another in the order they were queued, never interleaved', () => {
    const q = new StepQueue();
    const log: string[] = [];
    const a = q.run(job('a', 3, log));
    const b = q.run(job('b', 2, log));
    // Driven alternately, as two exchanges' slices are: b's steps finish a first.
    a.next();
    b.next();
    b.next();
    expect(log).toEqual(['a0', 'a1', 'a2']);
    expect(q.busy).toBe(true);
    expect(drainSteps(b)).toBe('b');
    expect(log).toEqual(['a0', 'a1', 'a2', 'b0', 'b1']);
    // a was finished by b's driver: its own driver gets its result at once.
    expect(a.next()).toEqual({ done: true, value: 'a' });
    expect(q.busy).toBe(false);
  });

  it("a job's error reaches its own caller only, and the next job goes on", () => {
    const q = new StepQueue();
    const log: string[] = [];
    function* failing(): Generator<void, string> {
      yield;
      throw new Error('bad record');
    }
    const a = q.run(failing());
    const b = q.run(job('b', 1, log));
    a.next();
    expect(drainSteps(b)).toBe('b');
    expect(() => a.next()).toThrow('bad record');
  });
});
