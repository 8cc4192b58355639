import { RunError } from '../../errors.js';
import type { Logger } from '../../logger.js';

/**
 * HF Jobs hardware flavours and their prices. The list comes from `GET /api/jobs/hardware`
 * (`listJobHardware`), cached; the API prices each flavour per `unitLabel` ("minute" today) and cards show
 * an hourly price. When the API cannot be reached, the table from the Hub's pricing page stands in.
 */

/** One flavour as Shepherd uses it. */
export interface HfFlavor {
  name: string;
  prettyName: string;
  /** GPUs in one job on this flavour (0 for CPU and non-GPU accelerators). */
  gpus: number;
  /** "1x A10G 24 GB", "2 vCPU 16 GB" — for notes. */
  summary: string;
  hourlyUsd: number;
}

/** The parts of `ApiJobHardware` (@huggingface/hub `types/api/api-jobs.ts`) that prices and GPUs come from. */
export interface ApiHardware {
  name: string;
  prettyName: string;
  cpu: string;
  ram: string;
  accelerator: { type: string; model: string; quantity: string; vram: string } | null;
  unitCostUSD: number;
  unitLabel: string;
}

const SECONDS_PER_UNIT: Readonly<Record<string, number>> = {
  second: 1,
  minute: 60,
  hour: 3600,
  day: 86_400,
};

/** Price per `unitLabel` to price per hour; undefined for a unit this code does not know. */
export function hourlyPrice(unitCostUsd: number, unitLabel: string): number | undefined {
  const seconds = SECONDS_PER_UNIT[unitLabel.trim().toLowerCase().replace(/s$/, '')];
  if (seconds === undefined || !Number.isFinite(unitCostUsd)) return undefined;
  // Rounded to a hundredth of a cent: per-minute prices are themselves rounded (0.000167 for $0.01/h).
  return Math.round(unitCostUsd * (3600 / seconds) * 10_000) / 10_000;
}

export function flavorFromApi(hardware: ApiHardware): HfFlavor | undefined {
  const hourlyUsd = hourlyPrice(hardware.unitCostUSD, hardware.unitLabel);
  if (hourlyUsd === undefined) return undefined;
  const accelerator = hardware.accelerator;
  const count = accelerator === null ? 0 : Number.parseInt(accelerator.quantity, 10);
  const gpus = accelerator?.type === 'gpu' && Number.isFinite(count) ? count : 0;
  const summary =
    accelerator === null
      ? `${hardware.cpu}, ${hardware.ram}`
      : `${accelerator.quantity}x ${accelerator.model} ${accelerator.vram}, ${hardware.cpu}, ${hardware.ram}`;
  return { name: hardware.name, prettyName: hardware.prettyName, gpus, summary, hourlyUsd };
}

/**
 * Fallback: the Hub's pricing page (hub-docs `docs/hub/jobs-pricing.md`, "Hourly Price"), with the flavour
 * names of huggingface_hub's `JobHardware` enum. Read for Shepherd 0.2; the live list wins whenever it answers.
 */
const PRICING_PAGE: ReadonlyArray<
  [name: string, prettyName: string, gpus: number, summary: string, usd: number]
> = [
  ['cpu-basic', 'CPU Basic', 0, '2 vCPU, 16 GB', 0.01],
  ['cpu-upgrade', 'CPU Upgrade', 0, '8 vCPU, 32 GB', 0.03],
  ['cpu-xl', 'CPU XL', 0, '16 vCPU, 124 GB', 1.0],
  ['cpu-performance', 'CPU Performance', 0, '32 vCPU, 256 GB', 1.9],
  ['t4-small', 'Nvidia T4 - small', 1, '1x T4 16 GB, 4 vCPU, 15 GB', 0.4],
  ['t4-medium', 'Nvidia T4 - medium', 1, '1x T4 16 GB, 8 vCPU, 30 GB', 0.6],
  ['l4x1', '1x Nvidia L4', 1, '1x L4 24 GB, 8 vCPU, 30 GB', 0.8],
  ['l4x4', '4x Nvidia L4', 4, '4x L4 96 GB, 48 vCPU, 186 GB', 3.8],
  ['l40sx1', '1x Nvidia L40S', 1, '1x L40S 48 GB, 8 vCPU, 62 GB', 1.8],
  ['l40sx4', '4x Nvidia L40S', 4, '4x L40S 192 GB, 48 vCPU, 382 GB', 8.3],
  ['l40sx8', '8x Nvidia L40S', 8, '8x L40S 384 GB, 192 vCPU, 1534 GB', 23.5],
  ['a10g-small', 'Nvidia A10G - small', 1, '1x A10G 24 GB, 4 vCPU, 15 GB', 1.0],
  ['a10g-large', 'Nvidia A10G - large', 1, '1x A10G 24 GB, 12 vCPU, 46 GB', 1.5],
  ['a10g-largex2', '2x Nvidia A10G - large', 2, '2x A10G 48 GB, 24 vCPU, 92 GB', 3.0],
  ['a10g-largex4', '4x Nvidia A10G - large', 4, '4x A10G 96 GB, 48 vCPU, 184 GB', 5.0],
  ['a100-large', 'Nvidia A100 - large', 1, '1x A100 80 GB, 12 vCPU, 142 GB', 2.5],
  ['a100x4', '4x Nvidia A100 - large', 4, '4x A100 320 GB, 48 vCPU, 568 GB', 10.0],
  ['a100x8', '8x Nvidia A100 - large', 8, '8x A100 640 GB, 96 vCPU, 1136 GB', 20.0],
  ['h200', 'Nvidia H200', 1, '1x H200 141 GB, 23 vCPU, 256 GB', 5.0],
  ['h200x2', '2x Nvidia H200', 2, '2x H200 282 GB, 46 vCPU, 512 GB', 10.0],
  ['h200x4', '4x Nvidia H200', 4, '4x H200 564 GB, 92 vCPU, 1024 GB', 20.0],
  ['h200x8', '8x Nvidia H200', 8, '8x H200 1128 GB, 184 vCPU, 2048 GB', 40.0],
  ['rtx-pro-6000', 'Nvidia RTX PRO 6000', 1, '1x RTX PRO 6000 96 GB, 23 vCPU, 256 GB', 2.75],
  ['rtx-pro-6000x2', '2x Nvidia RTX PRO 6000', 2, '2x RTX PRO 6000 192 GB, 46 vCPU, 512 GB', 5.5],
  ['rtx-pro-6000x4', '4x Nvidia RTX PRO 6000', 4, '4x RTX PRO 6000 384 GB, 92 vCPU, 1024 GB', 11.0],
  ['rtx-pro-6000x8', '8x Nvidia RTX PRO 6000', 8, '8x RTX PRO 6000 768 GB, 184 vCPU, 2048 GB', 22.0],
];

export const FALLBACK_FLAVORS: readonly HfFlavor[] = PRICING_PAGE.map(
  ([name, prettyName, gpus, summary, hourlyUsd]) => ({ name, prettyName, gpus, summary, hourlyUsd }),
);

/** The flavour people expect for a GPU count (the defaults), when the list offers it. */
const PREFERRED: Readonly<Record<number, string>> = {
  0: 'cpu-basic',
  1: 'a10g-small',
  2: 'a10g-largex2',
  4: 'a10g-largex4',
  8: 'a100x8',
};

const cheapest = (flavors: readonly HfFlavor[]) =>
  [...flavors].sort((a, b) => a.hourlyUsd - b.hourlyUsd || a.name.localeCompare(b.name))[0];

/**
 * The flavour for `--gpus N` when none is named: the preferred one if listed, else the cheapest with exactly
 * N GPUs, else the cheapest with more (then `roundedUp` is true, for a note on the card).
 */
export function defaultFlavor(
  gpus: number,
  flavors: readonly HfFlavor[],
): { flavor: HfFlavor; roundedUp: boolean } {
  const preferred = flavors.find((flavor) => flavor.name === PREFERRED[gpus]);
  if (preferred !== undefined) return { flavor: preferred, roundedUp: false };
  const exact = cheapest(flavors.filter((flavor) => flavor.gpus === gpus));
  if (exact !== undefined) return { flavor: exact, roundedUp: false };
  const larger = [...flavors.filter((flavor) => flavor.gpus > gpus)].sort(
    (a, b) => a.gpus - b.gpus || a.hourlyUsd - b.hourlyUsd,
  )[0];
  if (larger !== undefined) return { flavor: larger, roundedUp: true };
  const most = Math.max(0, ...flavors.map((flavor) => flavor.gpus));
  throw new RunError('invalid_run', `no HF Jobs flavour has ${gpus} GPUs; the most in one job is ${most}`);
}

/** A named flavour, or a refusal that lists the ones the Hub offers. */
function namedFlavor(name: string, flavors: readonly HfFlavor[]): HfFlavor {
  const found = flavors.find((flavor) => flavor.name === name.trim());
  if (found !== undefined) return found;
  throw new RunError(
    'invalid_run',
    `unknown HF Jobs flavour "${name}"; available: ${flavors.map((flavor) => flavor.name).join(', ')}`,
  );
}

interface HardwareList {
  flavors: readonly HfFlavor[];
  /** `api`: the live list; `docs`: the pricing-page table, because the list could not be had (`problem`). */
  source: 'api' | 'docs';
  problem?: string;
}

/**
 * The flavour of a run: `--flavor`, else the configured one (`SHEPHERD_HF_FLAVOR`), else the default for its
 * GPU count; with notes for the card (GPU count differs, prices from the docs table).
 */
export function pickFlavor(
  request: { gpus: number; flavor?: string | undefined },
  list: HardwareList,
  configured: string | undefined,
): { flavor: HfFlavor; notes: string[] } {
  const notes: string[] = [];
  const named = request.flavor ?? configured;
  let flavor: HfFlavor;
  if (named !== undefined) {
    flavor = namedFlavor(named, list.flavors);
    if (flavor.gpus !== request.gpus) {
      notes.push(`${flavor.name} has ${flavor.gpus} GPU(s); the run asked for ${request.gpus}`);
    }
  } else {
    const chosen = defaultFlavor(request.gpus, list.flavors);
    flavor = chosen.flavor;
    if (chosen.roundedUp)
      notes.push(`no flavour has exactly ${request.gpus} GPUs; ${flavor.name} has ${flavor.gpus}`);
  }
  if (list.source === 'docs') {
    notes.push(
      `prices from the HF Jobs docs table: the hardware list could not be read (${list.problem ?? 'no answer'})`,
    );
  }
  return { flavor, notes };
}

export interface HardwareCatalog {
  list(): Promise<HardwareList>;
}

/**
 * The hardware list, fetched at most once per `ttlMs` (one hour). A failed fetch serves the last good list,
 * or the pricing-page table, and is retried after `retryMs`.
 */
export function createHardwareCatalog(options: {
  fetchHardware: () => Promise<ApiHardware[]>;
  logger: Logger;
  clock?: () => Date;
  ttlMs?: number;
  retryMs?: number;
}): HardwareCatalog {
  const now = () => (options.clock ?? (() => new Date()))().getTime();
  const ttlMs = options.ttlMs ?? 3_600_000;
  const retryMs = options.retryMs ?? 300_000;
  let cached: { list: HardwareList; until: number } | undefined;
  let lastGood: HardwareList | undefined;
  let inFlight: Promise<HardwareList> | undefined;

  async function refresh(): Promise<HardwareList> {
    try {
      const flavors = (await options.fetchHardware()).flatMap((item) => flavorFromApi(item) ?? []);
      if (flavors.length === 0) throw new Error('the hardware list is empty');
      lastGood = { flavors, source: 'api' };
      cached = { list: lastGood, until: now() + ttlMs };
    } catch (error) {
      const problem = error instanceof Error ? error.message : String(error);
      options.logger.warn(
        { err: error },
        'HF Jobs hardware list unavailable; using the last list or the docs table',
      );
      const list: HardwareList = lastGood ?? { flavors: FALLBACK_FLAVORS, source: 'docs', problem };
      cached = { list, until: now() + retryMs };
    }
    return cached.list;
  }

  return {
    list() {
      if (cached !== undefined && now() < cached.until) return Promise.resolve(cached.list);
      inFlight ??= refresh().finally(() => {
        inFlight = undefined;
      });
      return inFlight;
    },
  };
}
