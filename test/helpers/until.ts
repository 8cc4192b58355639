/** A condition to wait for: a value when it holds; `undefined` or `false` while it does not yet. */
type Probe<T> = () => Promise<T | undefined | false> | T | undefined | false;

/**
 * Polls `probe` (sync or async) every `intervalMs` until it returns a value other than `undefined` or
 * `false`, and resolves with it; fails naming `what` after `timeoutMs`.
 */
export async function until<T>(
  probe: Probe<T>,
  what: string,
  timeoutMs = 15_000,
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/**
 * `until` with a file's own default timeout and polling interval: flows with slow backends wait longer
 * and poll less often (a Slurm probe runs `squeue`).
 */
export function untilEvery(pace: { timeoutMs: number; intervalMs: number }) {
  return <T>(probe: Probe<T>, what: string, timeoutMs = pace.timeoutMs): Promise<T> =>
    until(probe, what, timeoutMs, pace.intervalMs);
}
