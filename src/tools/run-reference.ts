import { z } from 'zod';

/** How a tool names a run: its id (r-…) or its name. One schema, so every tool takes the same references. */
export const runReference = (description = 'The run id (r-…) or its name') =>
  z.string().min(1).max(100).describe(description);
