import { join } from 'node:path';
import type { RunOverview, RunsDirectory } from '../../bot/runs-directory.js';
import { definedOnly } from '../../defined-only.js';
import { readLastMetrics } from '../file-tail.js';
import { RUN_FILES } from '../records/run-files.js';
import type { RunMeta } from '../records/run-types.js';
import type { RunQueries } from '../run-queries.js';
import type { RunOperations } from './operation-types.js';

/** Only the tail is read: a list shows the last loss, not the history. */
const LAST_RECORDS = 5;

function lossOf(values: Record<string, number>): number | undefined {
  const names = Object.keys(values);
  const name = names.find((entry) => entry === 'loss') ?? names.find((entry) => /loss/i.test(entry));
  return name === undefined ? undefined : values[name];
}

/** The runs as Slack's App Home and Discord's autocomplete see them; changes go through chat's operations. */
export function createRunsDirectory(parts: { runs: RunQueries; operations: RunOperations }): RunsDirectory {
  const { runs, operations } = parts;

  async function overview(meta: RunMeta): Promise<RunOverview> {
    const records = await readLastMetrics(join(runs.runDirectory(meta.id), RUN_FILES.metrics), LAST_RECORDS);
    const last = records.at(-1);
    const step = last?.step ?? meta.lastStep;
    const loss = last === undefined ? undefined : lossOf(last.values);
    return {
      id: meta.id,
      name: meta.name,
      status: meta.status,
      gpus: meta.gpus,
      threadId: meta.threadId,
      createdAt: meta.createdAt,
      ...definedOnly({ step, loss }),
    };
  }

  return {
    async list() {
      const metas = await runs.list();
      metas.sort((a, b) => b.createdAt.localeCompare(a.createdAt));
      return Promise.all(metas.map(overview));
    },
    change(change, runId, actor, threadId) {
      if (change === 'pause') return operations.pause(runId, actor, threadId, 'button');
      if (change === 'resume') return operations.resume(runId, actor, threadId, 'command');
      return operations.stop(runId, actor, threadId, 'button');
    },
  };
}
