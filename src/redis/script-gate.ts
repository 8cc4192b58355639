import type { Redis } from 'ioredis';
import { type ScriptRunners, scriptSha } from './connection.js';

interface QueuedCall {
  script: { sha: string; text: string };
  keys: string[];
  args: (string | number)[];
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** Calls per batch at most: a burst past it goes out in several. */
const MAX_BATCH = 256;

const isNoScript = (error: unknown) => error instanceof Error && error.message.startsWith('NOSCRIPT');

/**
 * Script runners that send a connection's script calls one batch at a time (the acking connection's:
 * every message a person posts is one such call). While a batch waits for its replies, new calls queue
 * and then go out together, corked into one socket write, one wake-up of Redis and one read of the
 * replies for all of them. Alone, a call goes out at once, as before; in a burst the batches grow with
 * it, so the system calls per message fall exactly when the CPU is short. On this two-core VM a loopback
 * write cost the acking process ~40 µs, a quarter of its CPU per ack (docs/benchmarks.md).
 *
 * Calls reach Redis in the order they were made, and each caller hears back as soon as its own reply (or
 * error) arrives. A script is sent in full (EVAL) until Redis has run it for this gate, and again after
 * every reconnect (a restarted Redis has forgotten it), so a batch never meets NOSCRIPT halfway and runs
 * its later calls first. Only a `SCRIPT FLUSH` on a live server still can: those calls are sent again in
 * full as their NOSCRIPT replies arrive, after the rest of the batch.
 */
export function createScriptGate(redis: Redis): ScriptRunners {
  let queued: QueuedCall[] = [];
  let inFlight = false;
  /** Calls of the batch out whose replies have not arrived. */
  let outstanding = 0;
  /** Scripts Redis has run since this connection was last (re)connected. */
  const loaded = new Set<string>();
  redis.on('ready', () => loaded.clear());

  function send(): void {
    inFlight = true;
    const batch = queued.length <= MAX_BATCH ? queued : queued.slice(0, MAX_BATCH);
    queued = queued.length <= MAX_BATCH ? [] : queued.slice(MAX_BATCH);
    outstanding = batch.length;
    // Corked, the batch's commands leave in one write when the loop below is done.
    const stream = redis.status === 'ready' ? redis.stream : undefined;
    stream?.cork();
    for (const call of batch) sendCall(call);
    stream?.uncork();
  }

  /** The last reply of a batch opens the gate, before its caller hears back: a call it makes goes out at once. */
  function replied(): void {
    outstanding -= 1;
    if (outstanding > 0) return;
    inFlight = false;
    if (queued.length > 0) send();
  }

  const argumentsOf = (call: QueuedCall) => [call.keys.length, ...call.keys, ...call.args] as const;

  function evalInFull(call: QueuedCall): Promise<unknown> {
    return redis.eval(call.script.text, ...argumentsOf(call)).then((reply) => {
      loaded.add(call.script.sha);
      return reply;
    });
  }

  /** Sends one call and answers its caller; a NOSCRIPT is sent again in full as soon as it arrives. */
  function sendCall(call: QueuedCall): void {
    const sent = loaded.has(call.script.sha)
      ? redis.evalsha(call.script.sha, ...argumentsOf(call)).catch((error: unknown) => {
          if (!isNoScript(error)) throw error;
          loaded.delete(call.script.sha);
          return evalInFull(call);
        })
      : evalInFull(call);
    sent.then(
      (reply) => {
        replied();
        call.resolve(reply);
      },
      (error: unknown) => {
        replied();
        call.reject(error);
      },
    );
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
