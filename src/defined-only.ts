/**
 * `exactOptionalPropertyTypes` forbids `{ title: undefined }` where `title?: string` is declared, which
 * used to force `...(x === undefined ? {} : { x })` spreads. `definedOnly({ title, comment })` drops the
 * undefined properties and types the ones that may be undefined as optional.
 */
type DefinedOnly<T> = {
  [Key in keyof T as undefined extends T[Key] ? never : Key]: T[Key];
} & {
  [Key in keyof T as undefined extends T[Key] ? Key : never]?: Exclude<T[Key], undefined>;
};

export function definedOnly<T extends object>(value: T): DefinedOnly<T> {
  const result: Record<string, unknown> = {};
  for (const [key, entry] of Object.entries(value)) if (entry !== undefined) result[key] = entry;
  return result as DefinedOnly<T>;
}
