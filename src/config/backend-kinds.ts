/*
 * The backends by name, and the placement flags people type. No imports: run types, the config and the
 * command parser read these without reaching the executor port.
 */

/** Where runs can go. `SHEPHERD_BACKENDS` lists the configured ones; each run records its own in `meta.executor`. */
export const BACKEND_KINDS = ['local', 'slurm', 'kubernetes', 'hfjobs'] as const;
export type BackendKind = (typeof BACKEND_KINDS)[number];

/** The word people type for each backend (`--on k8s`), and the name cards use. */
export const BACKEND_LABELS: Readonly<Record<BackendKind, { flag: string; title: string }>> = {
  local: { flag: 'local', title: 'this host' },
  slurm: { flag: 'slurm', title: 'Slurm' },
  kubernetes: { flag: 'k8s', title: 'Kubernetes' },
  hfjobs: { flag: 'hf', title: 'HF Jobs' },
};

/** The placement flags of `run`, `sweep` and `resume`, and the word each takes. */
const PLACEMENT_FLAGS = {
  '--on': { field: 'on', pattern: /^[A-Za-z0-9_-]{1,32}$/, takes: 'a backend name: local, slurm, k8s or hf' },
  '--image': {
    field: 'image',
    pattern: /^[\w./:@-]{1,255}$/,
    takes: 'an image reference like ghcr.io/org/train:1.0',
  },
  '--flavor': { field: 'flavor', pattern: /^[\w.-]{1,64}$/, takes: 'a hardware flavour like a10g-small' },
} as const;

/**
 * Sets `--on`, `--image` or `--flavor` on `target` (as `on`, `image`, `flavor`). Returns an error sentence,
 * undefined when set, or `'not a placement flag'` for any other key.
 */
export function setPlacementFlag(
  target: { on?: string; image?: string; flavor?: string },
  key: string,
  value: string,
): string | undefined {
  const flag = PLACEMENT_FLAGS[key as keyof typeof PLACEMENT_FLAGS];
  if (flag === undefined) return 'not a placement flag';
  if (!flag.pattern.test(value)) return `${key} takes ${flag.takes}`;
  target[flag.field] = value;
  return undefined;
}

/** A backend by its name or its flag (`kubernetes` or `k8s`, `hfjobs` or `hf`), case-insensitive. */
export function parseBackendName(name: string): BackendKind | undefined {
  const wanted = name.trim().toLowerCase();
  return BACKEND_KINDS.find((kind) => kind === wanted || BACKEND_LABELS[kind].flag === wanted);
}
