import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseJsonWith } from '../../src/text/json.js';

describe('parseJsonWith', () => {
  const point = z.object({ step: z.number(), loss: z.number().optional() });

  it('gives the value of the schema, without keys it does not name', () => {
    expect(parseJsonWith(point, '{"step": 3, "loss": 0.5, "extra": true}')).toEqual({ step: 3, loss: 0.5 });
  });

  it('gives undefined for text that is not JSON, or JSON of another shape', () => {
    expect(parseJsonWith(point, '{"step": 3, "lo')).toBeUndefined();
    expect(parseJsonWith(point, '{"step": "3"}')).toBeUndefined();
    expect(parseJsonWith(point, 'null')).toBeUndefined();
  });
});
