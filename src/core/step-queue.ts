// Runs stepped jobs (generators that yield between bounded pieces of work) one after another, in the order
// they were queued, whoever drives them. Pure: no timers and no clock; it never runs two jobs' pieces interleaved.

interface Job {
  work: Generator<void, unknown>;
  done: boolean;
  value: unknown;
  failed: boolean;
  error: unknown;
}

/**
 * A line of stepped jobs over shared state. A job queued while another is under way waits, and while it
 * waits each of its steps advances the job at the head by one piece: an earlier job finishes even if its
 * own driver stopped driving it, and no job ever starts while another is half done. A job's error reaches
 * its own caller only.
 */
export class StepQueue {
  private readonly jobs: Job[] = [];

  /** Whether a job is queued or under way. */
  get busy(): boolean {
    return this.jobs.length > 0;
  }

  /** Runs `work` once every job queued before it is done; yields between pieces; returns its result. */
  *run<T>(work: Generator<void, T>): Generator<void, T> {
    const job: Job = { work, done: false, value: undefined, failed: false, error: undefined };
    this.jobs.push(job);
    for (;;) {
      // Not done, so still in the line: there is a head (this job, or one before it).
      if (!job.done) {
        const head = this.jobs[0] as Job;
        advance(head);
        if (head.done) this.jobs.shift();
      }
      if (job.done) {
        if (job.failed) throw job.error;
        return job.value as T;
      }
      yield;
    }
  }
}

/** One piece of a job; an error ends it and is kept for its own caller. */
function advance(job: Job): void {
  if (job.done) return;
  try {
    const r = job.work.next();
    if (r.done) {
      job.done = true;
      job.value = r.value;
    }
  } catch (err) {
    job.done = true;
    job.failed = true;
    job.error = err;
  }
}
