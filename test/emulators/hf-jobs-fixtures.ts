import type { getJob, listJobHardware, listScheduledJobs, whoAmI } from '@huggingface/hub';

/**
 * Shapes and fixtures of the HF Jobs emulator. Every type is taken from @huggingface/hub 2.17.5 itself
 * (`src/types/api/api-jobs.ts`, reached through the functions that return them, since the package does not
 * export the names); where the Hub answers more than that type says, the extra field names its source.
 */

/** `ApiJob` (api-jobs.ts), returned by `getJob`, `runJob`, `cancelJob`. */
type ApiJob = Awaited<ReturnType<typeof getJob>>;
/** `ApiJobHardware` (api-jobs.ts), returned by `listJobHardware`. */
export type ApiJobHardware = Awaited<ReturnType<typeof listJobHardware>>[number];
/** `ApiScheduledJob` (api-jobs.ts), returned by `listScheduledJobs`. */
type ApiScheduledJob = Awaited<ReturnType<typeof listScheduledJobs>>[number];
/** `WhoAmIUser & { auth: AuthInfo }` (lib/who-am-i.ts), returned by `whoAmI`. */
type ApiWhoAmI = Awaited<ReturnType<typeof whoAmI>>;

/**
 * The stages the Hub reports: `JobStage` of huggingface_hub `_jobs_api.py` ("copied from moon-landing >
 * server > lib > Job.ts"). The JS type's `JobStatusStage` lists Space stages (PAUSED, STOPPED…) instead, so
 * `status` is re-declared here with the Hub's stages; the rest of `ApiJob` is kept as the JS type has it.
 */
export type HubJobStage = 'SCHEDULING' | 'RUNNING' | 'COMPLETED' | 'CANCELED' | 'ERROR' | 'DELETED';

export type EmulatedJob = Omit<ApiJob, 'status' | 'flavor'> & {
  status: { stage: HubJobStage; message: string | null; failureCount: number };
  /** `ApiJob.flavor` is `SpaceHardwareFlavor`, which lags the Hub's list (no h200); the Hub takes any listed name. */
  flavor: string;
};

export type EmulatedScheduledJob = Omit<ApiScheduledJob, 'jobSpec'> & {
  jobSpec: Omit<ApiScheduledJob['jobSpec'], 'flavor'> & { flavor: string };
  /** `ScheduledJobInfo.owner` / `.status` of huggingface_hub `_jobs_api.py` (not in the JS type). */
  owner: { id: string; name: string; type: 'user' };
  status: { lastJob: { id: string; at: string } | null; nextJobRunAt: string | null };
};

export function whoAmIFixture(namespace: string): ApiWhoAmI {
  return {
    id: '5e9ecfc04957053f60648a3e',
    type: 'user',
    name: namespace,
    fullname: namespace,
    email: `${namespace}@example.com`,
    emailVerified: true,
    isPro: true,
    orgs: [],
    canPay: true,
    avatarUrl: '',
    periodEnd: null,
    billingMode: 'prepaid',
    auth: {
      type: 'access_token',
      accessToken: { displayName: 'jobs', role: 'write', createdAt: new Date(0) },
    },
  };
}

/**
 * Hardware as `GET /api/jobs/hardware` lists it: prices per minute (`unitLabel: "minute"`, as the issue
 * observed and huggingface_hub's `JobHardware` docstring shows: cpu-basic at 167 micro-USD = $0.000167 a
 * minute). Hourly prices from hub-docs `docs/hub/jobs-pricing.md`, divided by 60 and rounded to 6 places
 * as the API's `unitCostUSD`; `hourlyOverrides` lets a test serve another price than the docs table.
 */
const HARDWARE: ReadonlyArray<[string, string, string, string, [string, string, string] | null, number]> = [
  ['cpu-basic', 'CPU Basic', '2 vCPU', '16 GB', null, 0.01],
  ['cpu-upgrade', 'CPU Upgrade', '8 vCPU', '32 GB', null, 0.03],
  ['t4-small', 'Nvidia T4 - small', '4 vCPU', '15 GB', ['T4', '1', '16 GB'], 0.4],
  ['l4x1', '1x Nvidia L4', '8 vCPU', '30 GB', ['L4', '1', '24 GB'], 0.8],
  ['a10g-small', 'Nvidia A10G - small', '4 vCPU', '15 GB', ['A10G', '1', '24 GB'], 1.0],
  ['a10g-large', 'Nvidia A10G - large', '12 vCPU', '46 GB', ['A10G', '1', '24 GB'], 1.5],
  ['a10g-largex2', '2x Nvidia A10G - large', '24 vCPU', '92 GB', ['A10G', '2', '48 GB'], 3.0],
  ['a10g-largex4', '4x Nvidia A10G - large', '48 vCPU', '184 GB', ['A10G', '4', '96 GB'], 5.0],
  ['a100-large', 'Nvidia A100 - large', '12 vCPU', '142 GB', ['A100', '1', '80 GB'], 2.5],
  ['a100x8', '8x Nvidia A100 - large', '96 vCPU', '1136 GB', ['A100', '8', '640 GB'], 20.0],
  ['h200', 'Nvidia H200', '23 vCPU', '256 GB', ['H200', '1', '141 GB'], 5.0],
];

export function hardwareFixture(hourlyOverrides: Readonly<Record<string, number>> = {}): ApiJobHardware[] {
  return HARDWARE.map(([name, prettyName, cpu, ram, gpu, hourly]) => {
    const perMinute = Math.round(((hourlyOverrides[name] ?? hourly) / 60) * 1e6) / 1e6;
    return {
      name,
      prettyName,
      cpu,
      ram,
      accelerator:
        gpu === null
          ? null
          : { type: 'gpu', model: gpu[0], quantity: gpu[1], vram: gpu[2], manufacturer: 'Nvidia' },
      unitCostMicroUSD: Math.round(perMinute * 1e6),
      unitCostUSD: perMinute,
      unitLabel: 'minute',
    };
  });
}
