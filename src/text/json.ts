import type { z } from 'zod';

/**
 * JSON read back from a file or Redis, checked against a schema instead of cast: the value, or undefined
 * when the text is not JSON or not of that shape (callers skip such an entry, as they skip a torn line).
 */
export function parseJsonWith<Schema extends z.ZodType>(
  schema: Schema,
  text: string,
): z.output<Schema> | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  const parsed = schema.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}
