/**
 * Secret redaction for anything quoted from a run's output into a chat thread or an LLM prompt.
 * Over-redacting is fine; leaking a token is not.
 */
const RULES: Array<[RegExp, string]> = [
  [/\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}/g, 'sk-[REDACTED]'],
  [/\bhf_[A-Za-z0-9]{20,}/g, 'hf_[REDACTED]'],
  [/\bxox[abposr]-[A-Za-z0-9-]{8,}/g, 'xox-[REDACTED]'],
  [/\bxapp-[A-Za-z0-9-]{8,}/g, 'xapp-[REDACTED]'],
  [/\bgh[pousr]_[A-Za-z0-9]{20,}/g, 'gh_[REDACTED]'],
  [/\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g, 'AKIA[REDACTED]'],
  [/\b(Bearer|Token)\s+[A-Za-z0-9._~+/=-]{8,}/gi, '$1 [REDACTED]'],
  // key=value / key: value pairs whose key names a secret (password=…, aws_secret_access_key = …).
  [
    /\b([A-Za-z_]*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key)[A-Za-z_]*)(["']?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s,;&]+)/gi,
    '$1$2[REDACTED]',
  ],
  // Credentials inside URLs: scheme://user:password@host.
  [/\b([a-z][a-z0-9+.-]*:\/\/[^\s:/@]+):[^\s@/]+@/gi, '$1:[REDACTED]@'],
];

export function redactSecrets(text: string): string {
  let output = text;
  for (const [pattern, replacement] of RULES) output = output.replace(pattern, replacement);
  return output;
}
