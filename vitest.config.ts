import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests spawn real processes and talk to real Redis; two cores, so keep the pool small.
    maxWorkers: 2,
    fileParallelism: true,
    reporters: ['default'],
  },
});
