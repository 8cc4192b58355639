/** Benchmarks print `name=value` lines on stdout; everything else goes to stderr. */
export function print(name: string, value: number | string): void {
  process.stdout.write(`${name}=${typeof value === 'number' ? round(value) : value}\n`);
}

/** Progress notes for a human watching; kept off stdout so `name=value` parsing stays clean. */
export function note(text: string): void {
  process.stderr.write(`# ${text}\n`);
}

/** Rounds to 3 significant decimals without trailing noise. */
export function round(value: number): number {
  if (!Number.isFinite(value)) return value;
  return Math.round(value * 1000) / 1000;
}

/** The `fraction` quantile (0..1) of `values`, nearest-rank. */
export function quantile(values: readonly number[], fraction: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1));
  return sorted[rank] ?? Number.NaN;
}
