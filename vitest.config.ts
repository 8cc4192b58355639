import { defineConfig } from 'vitest/config';

/** Slurm tests share one real cluster (and its 2 GPUs): they get their own project and run one file at a time. */
const slurmFiles = ['test/slurm/**/*.test.ts', 'test/flows/slurm-*.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests spawn real processes and talk to real Redis; two cores, so keep the pool small.
    maxWorkers: 2,
    reporters: ['default'],
    projects: [
      {
        extends: true,
        test: { name: 'main', include: ['test/**/*.test.ts'], exclude: slurmFiles, fileParallelism: true },
      },
      { extends: true, test: { name: 'slurm', include: slurmFiles, fileParallelism: false } },
    ],
  },
});
