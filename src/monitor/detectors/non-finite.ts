/** NaN / ±Inf in any metric of a point. */
export function nonFiniteMetrics(metrics: Record<string, number>): string[] {
  const names: string[] = [];
  for (const [name, value] of Object.entries(metrics)) if (!Number.isFinite(value)) names.push(name);
  return names;
}

export function describeNonFinite(value: number): string {
  return Number.isNaN(value) ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity';
}
