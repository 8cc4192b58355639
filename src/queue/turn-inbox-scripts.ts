/* The turn inbox's Lua scripts (turn-inbox.ts runs them); the keys and arguments are named in each. */

/**
 * The accept as a Lua function, shared by the inbox's own script and the playground's fused one. An
 * accepted item also queues its thread's wake-up request (`[thread, key]` on the wake list) in the same
 * script, so the acking process adds no job: a turn worker's dispatcher turns wake requests into jobs.
 */
const ACCEPT_FUNCTION = `
-- delivery key, known-sessions set, inbox, pending-inboxes set, item json, thread id,
-- addressed ("1"/"0"), delivery ttl seconds, wake list, wake key (the delivery id)
local function accept_inbox_item(delivery, known, inbox, pending, item, thread, addressed, ttl, wake, wake_key)
  if redis.call('SET', delivery, '1', 'NX', 'EX', tonumber(ttl)) == false then return 'duplicate' end
  if addressed ~= '1' and redis.call('SISMEMBER', known, thread) == 0 then return 'ignored' end
  redis.call('SADD', known, thread)
  redis.call('RPUSH', inbox, item)
  redis.call('SADD', pending, thread)
  redis.call('RPUSH', wake, cjson.encode({ thread, wake_key }))
  return 'accepted'
end
`;

export const ACCEPT_SCRIPT = `${ACCEPT_FUNCTION}
return accept_inbox_item(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4], KEYS[5], ARGV[5])
`;

/** The same accept as a `ScriptStep` (its args in the order of `accept_inbox_item`'s parameters). */
export const ACCEPT_STEP_LUA = `${ACCEPT_FUNCTION}
local function step(args)
  return accept_inbox_item(args[1], args[2], args[3], args[4], args[5], args[6], args[7], args[8], args[9], args[10])
end
`;

export const PUSH_EVENT_SCRIPT = `
-- KEYS[1] known-sessions set, KEYS[2] inbox, KEYS[3] pending-inboxes set, KEYS[4] wake list
-- ARGV[1] item, ARGV[2] thread, ARGV[3] wake key
redis.call('SADD', KEYS[1], ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[2])
redis.call('RPUSH', KEYS[4], cjson.encode({ ARGV[2], ARGV[3] }))
return 1
`;

export const LOCK_AND_CLAIM_SCRIPT = `
-- KEYS[1] lock, KEYS[2] batch key, KEYS[3] inbox, KEYS[4..] keys the turn reads under the lock
-- ARGV[1] lock token, ARGV[2] lease ms, ARGV[3] new batch id, ARGV[4] max items, ARGV[5..] how each of
-- KEYS[4..] is read: 'list' (LRANGE 0 -1), 'hash' (HGETALL) or 'string' (GET; false when absent)
-- Returns {} when the lock is taken; {''} when the inbox is empty; else {batch json, {items...}, {reads...}}.
if not redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]), 'NX') then return {} end
local batch = redis.call('GET', KEYS[2])
local count = 0
if batch then
  count = tonumber(cjson.decode(batch).count)
else
  local length = redis.call('LLEN', KEYS[3])
  if length == 0 then return { '' } end
  count = math.min(length, tonumber(ARGV[4]))
  batch = cjson.encode({ batchId = ARGV[3], count = count })
  redis.call('SET', KEYS[2], batch)
end
local reads = {}
for index = 4, #KEYS do
  local kind = ARGV[index + 1]
  if kind == 'list' then reads[index - 3] = redis.call('LRANGE', KEYS[index], 0, -1)
  elseif kind == 'hash' then reads[index - 3] = redis.call('HGETALL', KEYS[index])
  else reads[index - 3] = redis.call('GET', KEYS[index]) end
end
return { batch, redis.call('LRANGE', KEYS[3], 0, count - 1), reads }
`;

export const CLAIM_SCRIPT = `
-- KEYS[1] batch key, KEYS[2] inbox; ARGV[1] new batch id, ARGV[2] max items
-- Returns {batch json, items...}: the batch a crashed attempt claimed, or a fresh one; {} when empty.
local batch = redis.call('GET', KEYS[1])
local count
if batch then
  count = tonumber(cjson.decode(batch).count)
else
  local length = redis.call('LLEN', KEYS[2])
  if length == 0 then return {} end
  count = math.min(length, tonumber(ARGV[2]))
  batch = cjson.encode({ batchId = ARGV[1], count = count })
  redis.call('SET', KEYS[1], batch)
end
local result = { batch }
for _, item in ipairs(redis.call('LRANGE', KEYS[2], 0, count - 1)) do table.insert(result, item) end
return result
`;

export const FORGET_IF_EMPTY_SCRIPT = `
if redis.call('LLEN', KEYS[1]) == 0 then redis.call('SREM', KEYS[2], ARGV[1]) end
return 1
`;

export const COMMIT_SCRIPT = `
-- KEYS[1] inbox, KEYS[2] batch key, KEYS[3] pending-inboxes set; ARGV[1] count, ARGV[2] thread id
redis.call('LTRIM', KEYS[1], tonumber(ARGV[1]), -1)
redis.call('DEL', KEYS[2])
if redis.call('LLEN', KEYS[1]) == 0 then redis.call('SREM', KEYS[3], ARGV[2]) end
return 1
`;

export const RELEASE_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

export const EXTEND_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2])) end
return 0
`;
