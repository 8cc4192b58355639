import { createHmac, randomBytes } from 'node:crypto';

/**
 * Untrusted text (logs, tracebacks, file contents, tool results, people's messages) reaches the model
 * inside a labelled boundary the content cannot close: the tag carries a nonce derived from a key
 * random per process and from the content itself, so text would have to contain its own keyed hash to
 * close it (a line of three backticks or a forged `</untrusted>` closes nothing). The nonce is stable
 * for the same content, which keeps provider-side prompt caching working across calls.
 */
const KEY = randomBytes(32);

function nonceFor(kind: string, text: string): string {
  return createHmac('sha256', KEY).update(kind).update('\0').update(text).digest('hex').slice(0, 12);
}

/** An attribute value with the characters that could end it removed. */
function attribute(value: string): string {
  return value.replace(/["<>\r\n]/g, ' ').slice(0, 200);
}

export function untrustedBlock(kind: string, text: string, attributes: Record<string, string> = {}): string {
  const tag = `${kind}-${nonceFor(kind, text)}`;
  const attrs = Object.entries(attributes)
    .map(([name, value]) => ` ${name}="${attribute(value)}"`)
    .join('');
  return `<${tag}${attrs}>\n${text}\n</${tag}>`;
}
