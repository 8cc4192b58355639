import { describe, expect, it } from 'vitest';
import { definedOnly } from '../../src/defined-only.js';

describe('definedOnly', () => {
  it('drops undefined properties and keeps every other value, falsy ones included', () => {
    const title: string | undefined = undefined;
    const result = definedOnly({ text: 'hi', title, count: 0, flag: false, empty: '', none: null });
    expect(result).toEqual({ text: 'hi', count: 0, flag: false, empty: '', none: null });
    expect(Object.keys(result)).not.toContain('title');
  });

  it('types possibly-undefined properties as optional, so the result fits exactOptionalPropertyTypes', () => {
    const comment: string | undefined = Math.random() > 2 ? 'never' : undefined;
    const upload: { filename: string; comment?: string } = definedOnly({ filename: 'a.png', comment });
    expect(upload).toEqual({ filename: 'a.png' });
  });
});
