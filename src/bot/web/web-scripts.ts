/*
 * Lua scripts for the playground store. A message is created in one atomic round trip: the id, the
 * message hash, the thread list, the channel indexes and the change event all happen together, so a
 * thread's list order always matches id order and no half-written message is ever visible.
 */

/**
 * KEYS[1] = id counter. ARGV: keyBase, channel, root ('' = new thread), user, text, ts, card, images,
 * files, visibleTo, eventsChannel. Returns the new id, or an error reply `ERR_THREAD_UNKNOWN`.
 */
const CREATE_MESSAGE_FUNCTION = `
local function create_message()
  local base = ARGV[1]
  local channel = ARGV[2]
  local root = ARGV[3]
  if root ~= '' then
    local existing = redis.call('HMGET', base .. ':msg:' .. root, 'channel', 'root')
    if existing[1] ~= channel or existing[2] ~= root then return redis.error_reply('ERR_THREAD_UNKNOWN') end
  end
  local id = 'm' .. redis.call('INCR', KEYS[1])
  if root == '' then root = id end
  local key = base .. ':msg:' .. id
  redis.call('HSET', key, 'channel', channel, 'root', root, 'user', ARGV[4], 'text', ARGV[5], 'ts', ARGV[6])
  if ARGV[7] ~= '' then redis.call('HSET', key, 'card', ARGV[7]) end
  if ARGV[8] ~= '' then redis.call('HSET', key, 'images', ARGV[8]) end
  if ARGV[9] ~= '' then redis.call('HSET', key, 'files', ARGV[9]) end
  if ARGV[10] ~= '' then redis.call('HSET', key, 'visibleTo', ARGV[10]) end
  redis.call('RPUSH', base .. ':thread:' .. root, id)
  redis.call('ZADD', base .. ':threads:' .. channel, tonumber(ARGV[6]), root)
  redis.call('ZADD', base .. ':channels', 'NX', tonumber(ARGV[6]), channel)
  redis.call('PUBLISH', ARGV[11], cjson.encode({kind = 'message-create', channel = channel, root = root, messageId = id}))
  return id
end
`;

/** The number of ARGV entries `create_message` reads; a step's args follow them. */
const CREATE_MESSAGE_ARGS = 11;

export const CREATE_MESSAGE_SCRIPT = `${CREATE_MESSAGE_FUNCTION}
return create_message()
`;

/**
 * Creates the message, then runs another module's `ScriptStep` (the inbox accept) with its args after
 * the message's and `SCRIPT_NEW_ID` (byte 1) replaced by the new id: one atomic round trip. Returns
 * {id, step result}; nothing of the step runs when the message is refused.
 */
export function createMessageWithStepScript(stepLua: string): string {
  return `${stepLua}
${CREATE_MESSAGE_FUNCTION}
local id = create_message()
if type(id) == 'table' then return id end
local args = {}
for index = ${CREATE_MESSAGE_ARGS + 1}, #ARGV do args[#args + 1] = (string.gsub(ARGV[index], '\\1', id)) end
return { id, step(args) }
`;
}

/**
 * KEYS[1] = message hash. ARGV: editedAt, text ('' with hasText '0' = keep), hasText, card ('' = keep),
 * eventsChannel. Returns 1, or 0 when the message does not exist.
 */
export const EDIT_MESSAGE_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'editedAt', ARGV[1])
if ARGV[3] == '1' then redis.call('HSET', KEYS[1], 'text', ARGV[2]) end
if ARGV[4] == '-' then redis.call('HDEL', KEYS[1], 'card')
elseif ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'card', ARGV[4]) end
local fields = redis.call('HMGET', KEYS[1], 'channel', 'root')
local id = string.match(KEYS[1], ':msg:(.+)$')
redis.call('PUBLISH', ARGV[5], cjson.encode({kind = 'message-edit', channel = fields[1], root = fields[2], messageId = id}))
return 1
`;
