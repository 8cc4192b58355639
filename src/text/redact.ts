/**
 * Secret redaction for everything that leaves the machine: chat posts (at the notify queue), LLM
 * requests (at the provider boundary) and log lines (in the logger). Over-redacting is fine; leaking a
 * token is not. Redact before cutting: a cut text may keep a secret's tail that no pattern recognises.
 */
const MARK = '[REDACTED]';

type Replacement = string | ((match: string, ...groups: string[]) => string);

/** Keeps a quoted value's quotes, so redacted code and JSON stay well-formed. */
const keepQuotes = (_match: string, key: string, separator: string, value: string) => {
  const quote = value.startsWith('"') || value.startsWith("'") ? value[0] : '';
  return `${key}${separator}${quote}${MARK}${quote}`;
};

const RULES: Array<[RegExp, Replacement]> = [
  // PEM private keys; an unterminated block (a cut file) is redacted to the end of the text.
  [
    /-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)/g,
    `-----${MARK} PRIVATE KEY-----`,
  ],
  // JSON Web Tokens: three base64url parts, the first two starting with `{"` encoded.
  [/\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*/g, `jwt-${MARK}`],
  [/\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}/g, `sk-${MARK}`],
  [/\bhf_[A-Za-z0-9]{20,}/g, `hf_${MARK}`],
  [/\bxox[abposre]-[A-Za-z0-9-]{8,}/g, `xox-${MARK}`],
  [/\bxapp-[A-Za-z0-9-]{8,}/g, `xapp-${MARK}`],
  [/\bgithub_pat_[A-Za-z0-9_]{20,}/g, `github_pat_${MARK}`],
  [/\bgh[pousr]_[A-Za-z0-9]{20,}/g, `gh_${MARK}`],
  [/\bglpat-[A-Za-z0-9_-]{20,}/g, `glpat-${MARK}`],
  [/\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g, `AKIA${MARK}`],
  [/\b(Bearer|Token)\s+[A-Za-z0-9._~+/=-]{8,}/gi, `$1 ${MARK}`],
  // key=value / key: value pairs whose key names a secret (password=…, aws_secret_access_key = …).
  [
    /\b([A-Za-z_]*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key)[A-Za-z_]*)(["']?\s*[=:]\s*)("[^"\n]*"|'[^'\n]*'|[^\s,;&"'`\\]+)/gi,
    keepQuotes,
  ],
  // Credentials inside URLs: scheme://user:password@host.
  [/\b([a-z][a-z0-9+.-]*:\/\/[^\s:/@]+):[^\s@/]+@/gi, `$1:${MARK}@`],
];

/** Literal values known to be secret (the bot's own tokens, `SHEPHERD_RUN_ENV_*` values). */
const literals = new Set<string>();
/** Shorter values would redact ordinary words; such a "secret" is not one worth the name. */
const MIN_LITERAL_LENGTH = 6;

/** Adds literal secret values to redact wherever they appear. Returns how many were kept. */
export function registerSecretValues(values: Iterable<string | undefined>): number {
  let kept = 0;
  for (const value of values) {
    const trimmed = value?.trim();
    if (trimmed === undefined || trimmed.length < MIN_LITERAL_LENGTH) continue;
    literals.add(trimmed);
    kept += 1;
  }
  // A text redacted before this literal was known may hold it.
  repeated.clear();
  return kept;
}

/** Texts sent again and again (the system prompt goes out with every LLM call), with their redaction. */
const repeated = new Map<string, string>();
/** Distinct repeated texts kept (the system prompt, with or without a thread's summary). */
const REPEATED_KEPT = 16;

/**
 * `redactSecrets` for a text sent again and again, such as the system prompt: its redaction is kept, so
 * the rules (~0.3 ms on the 6 kB prompt) run once per text rather than once per LLM call.
 */
export function redactRepeated(text: string): string {
  const known = repeated.get(text);
  if (known !== undefined) return known;
  const redacted = redactSecrets(text);
  // The oldest entry goes first (a Map keeps insertion order).
  if (repeated.size >= REPEATED_KEPT) repeated.delete(repeated.keys().next().value ?? '');
  repeated.set(text, redacted);
  return redacted;
}

export function redactSecrets(text: string): string {
  let output = text;
  // Literals first and longest first, so a value containing another is replaced whole.
  for (const literal of [...literals].sort((a, b) => b.length - a.length)) {
    if (output.includes(literal)) output = output.replaceAll(literal, MARK);
  }
  for (const [pattern, replacement] of RULES)
    output = output.replace(pattern, replacement as (match: string, ...groups: string[]) => string);
  return output;
}

/** Redacts every string inside a JSON-like value (objects, arrays), leaving other values alone. */
export function redactDeep<T>(value: T, depth = 0): T {
  if (typeof value === 'string') return redactSecrets(value) as T;
  if (depth > 8 || value === null || typeof value !== 'object') return value;
  if (value instanceof Uint8Array) return value;
  if (value instanceof Error) {
    const copy: Record<string, unknown> = {
      type: value.name,
      message: redactSecrets(value.message),
      ...(value.stack === undefined ? {} : { stack: redactSecrets(value.stack) }),
    };
    for (const [key, inner] of Object.entries(value)) copy[key] = redactDeep(inner, depth + 1);
    // `cause` is not enumerable, and it is often what explains the error (the socket error under a post).
    if (value.cause !== undefined) copy.cause = redactDeep(value.cause, depth + 1);
    return copy as T;
  }
  if (Array.isArray(value)) return value.map((inner) => redactDeep(inner, depth + 1)) as T;
  const copy: Record<string, unknown> = {};
  for (const [key, inner] of Object.entries(value as Record<string, unknown>))
    copy[key] = redactDeep(inner, depth + 1);
  return copy as T;
}

/**
 * The last `maxChars` of a text, redacted before the cut (a cut could keep the tail of a secret whose
 * recognisable start was cut off) and starting at a line boundary where there is one.
 */
export function redactedTail(text: string, maxChars: number): string {
  const redacted = redactSecrets(text);
  if (redacted.length <= maxChars) return redacted;
  const window = redacted.slice(-maxChars);
  const newline = window.indexOf('\n');
  return newline < 0 || newline === window.length - 1 ? window : window.slice(newline + 1);
}

/** The first `maxChars` of a text, redacted before the cut. */
export function redactedHead(text: string, maxChars: number): string {
  const redacted = redactSecrets(text);
  return redacted.length <= maxChars ? redacted : `${redacted.slice(0, Math.max(maxChars - 1, 0))}…`;
}
