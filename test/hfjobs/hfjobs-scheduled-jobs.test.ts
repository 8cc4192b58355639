import { createScheduledJob } from '@huggingface/hub';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createHfScheduledJobs,
  type HfSchedule,
  type HfScheduledJobs,
} from '../../src/runs/hfjobs/hfjobs-scheduled-jobs.js';
import { PYTHON_RUNTIME_DIR } from '../../src/runs/records/run-files.js';
import { type HfJobsEmulator, startHfJobsEmulator } from '../emulators/hf-jobs-server.js';
import { removeTree } from '../helpers/processes.js';
import { decodeJobPayload, HF_SETTINGS, makeRun, makeRunsDir, silentLogger } from './hfjobs-harness.js';

/* Recurring runs as HF scheduled jobs: create, list, delete, against the emulator. */

describe('HF scheduled jobs', () => {
  let emulator: HfJobsEmulator;
  let runsDir: string;

  beforeAll(async () => {
    emulator = await startHfJobsEmulator();
    runsDir = await makeRunsDir();
  });

  afterAll(async () => {
    await emulator.close();
    removeTree(runsDir);
  });

  const schedules = (): HfScheduledJobs =>
    createHfScheduledJobs({
      settings: HF_SETTINGS,
      hub: { url: emulator.url, token: emulator.token },
      helperDir: PYTHON_RUNTIME_DIR,
      logger: silentLogger,
    });
  const scheduledPosts = () =>
    emulator.requests.filter(
      (request) => request.method === 'POST' && request.path.startsWith('/api/scheduled-jobs/'),
    ).length;

  it('creates a scheduled job carrying the run’s job, lists it with its run, and deletes it', async () => {
    const script = 'print("nightly", flush=True)\n';
    const { meta, runDir } = await makeRun(runsDir, 'nightly', script, { gpus: 1, maxHours: 2 });
    const created: HfSchedule = await schedules().create({ meta, runDir, schedule: '0 3 * * *' });
    expect(created).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{24}$/),
      schedule: '0 3 * * *',
      suspended: false,
      flavor: 'a10g-small',
      image: HF_SETTINGS.image,
      runId: 'nightly',
    });
    const stored = emulator.scheduled.get(created.id);
    expect(stored).toMatchObject({
      suspend: false,
      concurrency: false,
      jobSpec: { timeoutSeconds: 7200, flavor: 'a10g-small' },
    });
    expect(decodeJobPayload(stored?.jobSpec.command ?? []).files['train.py']).toBe(script);

    // A scheduled job someone made by hand is listed too, without a run.
    await createScheduledJob({
      hubUrl: emulator.url,
      accessToken: emulator.token,
      namespace: emulator.namespace,
      schedule: '@hourly',
      jobSpec: { dockerImage: 'python:3.12', flavor: 'cpu-basic', command: ['python3', '-c', 'print(1)'] },
    });
    const listed = await schedules().list();
    expect(listed).toHaveLength(2);
    expect(listed.find((item) => item.id === created.id)?.runId).toBe('nightly');
    expect(listed.find((item) => item.id !== created.id)).toMatchObject({
      schedule: '@hourly',
      flavor: 'cpu-basic',
    });
    expect(listed.find((item) => item.id !== created.id)?.runId).toBeUndefined();

    await schedules().delete(created.id);
    expect(emulator.scheduled.has(created.id)).toBe(false);
    expect((await schedules().list()).map((item) => item.id)).not.toContain(created.id);
    await expect(schedules().delete(created.id)).rejects.toMatchObject({ code: 'backend_job_not_found' });
  });

  it('refuses a bad schedule or an unknown flavour before anything is sent', async () => {
    const { meta, runDir } = await makeRun(runsDir, 'bad-schedule', 'print(1)\n');
    const before = scheduledPosts();
    await expect(schedules().create({ meta, runDir, schedule: 'every night' })).rejects.toThrow(
      /is not a schedule/,
    );
    await expect(
      schedules().create({ meta: { ...meta, flavor: 'gpu-huge' }, runDir, schedule: '@daily' }),
    ).rejects.toThrow(/unknown HF Jobs flavour "gpu-huge"/);
    expect(scheduledPosts()).toBe(before);
  });
});
