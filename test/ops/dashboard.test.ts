import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createOpsMetrics } from '../../src/ops/ops-metrics.js';

describe('deploy/grafana dashboard', () => {
  it('only queries series that Shepherd serves', async () => {
    const dashboard = readFileSync(
      new URL('../../deploy/grafana/shepherd-dashboard.json', import.meta.url),
      'utf8',
    );
    const queried = new Set([...dashboard.matchAll(/shepherd_[a-z_]+/g)].map((match) => match[0]));
    expect(queried.size).toBeGreaterThanOrEqual(10);
    const metrics = createOpsMetrics({ defaultMetrics: false });
    try {
      const served = new Set((await metrics.registry.getMetricsAsJSON()).map((metric) => metric.name));
      for (const name of queried) {
        const base = name.replace(/_(bucket|sum|count)$/, '');
        expect(served.has(base), name).toBe(true);
      }
    } finally {
      metrics.stop();
    }
  });
});
