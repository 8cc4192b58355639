import type { Redis } from 'ioredis';
import { scriptSha } from './connection.js';

/** Runs one Lua script with its keys and arguments and resolves with Redis's reply. */
export type ScriptRunner = (keys: string[], args: (string | number)[]) => Promise<unknown>;

/** Makes a `ScriptRunner` for a script (each module names its own scripts). */
export type ScriptRunners = (script: string) => ScriptRunner;

interface QueuedCall {
  script: { sha: string; text: string };
  keys: string[];
  args: (string | number)[];
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** Calls per pipeline at most: a burst past it goes out in several. */
const MAX_BATCH = 256;

const isNoScript = (error: unknown) => error instanceof Error && error.message.startsWith('NOSCRIPT');

/**
 * Script runners that send a connection's script calls one batch at a time (the acking connection's:
 * every message a person posts is one such call). While a batch waits for its replies, new calls queue
 * and then go out together as one pipeline: one socket write, one wake-up of Redis and one read of the
 * replies for all of them. Alone, a call goes out at once, as before; in a burst the batches grow with
 * it, so the system calls per message fall exactly when the CPU is short. On this two-core VM a loopback
 * write cost the acking process ~40 µs, a quarter of its CPU per ack (docs/benchmarks.md).
 *
 * Calls reach Redis in the order they were made, and each gets its own reply or error. A script is sent
 * in full (EVAL) until Redis has run it for this gate, and again after every reconnect (a restarted Redis
 * has forgotten it), so a batch never meets NOSCRIPT halfway and runs its later calls first. Only a
 * `SCRIPT FLUSH` on a live server still can: those calls are sent again in full, after the batch.
 */
export function createScriptGate(redis: Redis): ScriptRunners {
  let queued: QueuedCall[] = [];
  let inFlight = false;
  /** Scripts Redis has run since this connection was last (re)connected. */
  const loaded = new Set<string>();
  redis.on('ready', () => loaded.clear());

  function send(): void {
    inFlight = true;
    const batch = queued.length <= MAX_BATCH ? queued : queued.slice(0, MAX_BATCH);
    queued = queued.length <= MAX_BATCH ? [] : queued.slice(MAX_BATCH);
    const sent = batch.length === 1 && batch[0] !== undefined ? sendOne(batch[0]) : sendMany(batch);
    void sent.then((answerCallers) => {
      // The gate opens before the callers hear back, so a call they make at once goes out at once.
      inFlight = false;
      if (queued.length > 0) send();
      answerCallers();
    });
  }

  const argumentsOf = (call: QueuedCall) => [call.keys.length, ...call.keys, ...call.args] as const;

  /**
   * What to tell a call's caller about its reply. A NOSCRIPT is sent again in full here, before the
   * next batch is written, and its caller hears from that resend instead.
   */
  function settle(call: QueuedCall, error: Error | null, value: unknown): () => void {
    if (error === null) {
      loaded.add(call.script.sha);
      return () => call.resolve(value);
    }
    if (!isNoScript(error)) return () => call.reject(error);
    loaded.delete(call.script.sha);
    redis.eval(call.script.text, ...argumentsOf(call)).then((reply) => {
      loaded.add(call.script.sha);
      call.resolve(reply);
    }, call.reject);
    return () => undefined;
  }

  async function sendOne(call: QueuedCall): Promise<() => void> {
    try {
      const reply = await (loaded.has(call.script.sha)
        ? redis.evalsha(call.script.sha, ...argumentsOf(call))
        : redis.eval(call.script.text, ...argumentsOf(call)));
      return settle(call, null, reply);
    } catch (error) {
      return settle(call, error instanceof Error ? error : new Error(String(error)), undefined);
    }
  }

  async function sendMany(batch: QueuedCall[]): Promise<() => void> {
    const pipeline = redis.pipeline();
    for (const call of batch) {
      if (loaded.has(call.script.sha)) pipeline.evalsha(call.script.sha, ...argumentsOf(call));
      else pipeline.eval(call.script.text, ...argumentsOf(call));
    }
    let results: Array<[Error | null, unknown]> | null;
    try {
      results = await pipeline.exec();
    } catch (error) {
      return () => {
        for (const call of batch) call.reject(error);
      };
    }
    const answers = batch.map((call, index) => {
      const [error, value] = results?.[index] ?? [new Error('Redis sent no reply for this call'), undefined];
      return settle(call, error, value);
    });
    return () => {
      for (const answer of answers) answer();
    };
  }

  return (script) => {
    const named = { sha: scriptSha(script), text: script };
    return (keys, args) =>
      new Promise((resolve, reject) => {
        queued.push({ script: named, keys, args, resolve, reject });
        if (!inFlight) send();
      });
  };
}
