"""The Lua scripts that make each multi-key step atomic.

A crash or a lost connection in the middle of accepting a ticket, storing its result or recording
a decision never leaves half of it behind: each of those steps is one script.
"""

# KEYS: idem, ticket, stream. ARGV: use_idem, id, payload_sha, result_ttl, idem_ttl, max_backlog,
# ticket_key_prefix, then field/value pairs of the ticket hash.
# Returns {"created", id} | {"exists", "<id> <sha>"} | {"full", backlog}.
ACCEPT = """
if ARGV[1] == '1' then
  local existing = redis.call('GET', KEYS[1])
  if existing then
    local id = string.match(existing, '^(%S+)')
    if redis.call('EXISTS', ARGV[7] .. id) == 1 then
      return {'exists', existing}
    end
  end
end
local backlog = redis.call('XLEN', KEYS[3])
if backlog >= tonumber(ARGV[6]) then
  return {'full', tostring(backlog)}
end
local fields = {}
for i = 8, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[2], unpack(fields))
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[4]))
redis.call('XADD', KEYS[3], '*', 'id', ARGV[2])
if ARGV[1] == '1' then
  redis.call('SET', KEYS[1], ARGV[2] .. ' ' .. ARGV[3], 'EX', tonumber(ARGV[5]))
end
return {'created', ARGV[2]}
"""

# KEYS: ticket, stream, queue (or ""), results, features, callbacks.
# ARGV: entry_id, group, result_json, final_level, completed_at, ticket_id, accepted_at,
#       features_blob, result_ttl, has_callback.
# Stores the result only if no other delivery stored one first; always acknowledges.
STORE_RESULT = """
local stored = 0
if redis.call('HGET', KEYS[1], 'status') ~= 'done' and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'status', 'done', 'result', ARGV[3], 'final_level', ARGV[4],
             'completed_at', ARGV[5])
  if KEYS[3] ~= '' then redis.call('ZADD', KEYS[3], tonumber(ARGV[7]), ARGV[6]) end
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', '100000', '*', 'id', ARGV[6])
  if ARGV[8] ~= '' then redis.call('SET', KEYS[5], ARGV[8], 'EX', tonumber(ARGV[9])) end
  if ARGV[10] == '1' then redis.call('XADD', KEYS[6], '*', 'id', ARGV[6]) end
  stored = 1
end
redis.call('XACK', KEYS[2], ARGV[2], ARGV[1])
redis.call('XDEL', KEYS[2], ARGV[1])
return stored
"""

# KEYS: ticket, stream, deadletter, queue, callbacks. ARGV: entry_id, group, ticket_id, reason,
#       deliveries, at, result_json, final_level, accepted_at, has_callback.
# Fails the ticket only if no delivery stored a result meanwhile; always acknowledges. A failed
# ticket calls back too: the helpdesk hears about every ticket it sent with a callback_url.
DEAD_LETTER = """
local failed = 0
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'done' and status ~= 'failed' and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('XADD', KEYS[3], '*', 'id', ARGV[3], 'reason', ARGV[4], 'deliveries', ARGV[5],
             'at', ARGV[6])
  redis.call('HSET', KEYS[1], 'status', 'failed', 'result', ARGV[7], 'final_level', ARGV[8],
             'error', ARGV[4], 'completed_at', ARGV[6])
  redis.call('ZADD', KEYS[4], tonumber(ARGV[9]), ARGV[3])
  if ARGV[10] == '1' then redis.call('XADD', KEYS[5], '*', 'id', ARGV[3]) end
  failed = 1
end
redis.call('XACK', KEYS[2], ARGV[2], ARGV[1])
redis.call('XDEL', KEYS[2], ARGV[1])
return failed
"""

# KEYS: ticket, decisions, queue:yellow, queue:red, queue:audit.
# ARGV: decision_json, ticket_id, correct_level.
# Returns {recorded, false_green}: a false green is a ticket served green (stored result, level
# green) that a person says is not green; counted once per ticket, whatever the decision's flag.
DECIDE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 0} end
redis.call('XADD', KEYS[2], '*', 'id', ARGV[2], 'data', ARGV[1])
redis.call('HSET', KEYS[1], 'decision', ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('ZREM', KEYS[4], ARGV[2])
redis.call('ZREM', KEYS[5], ARGV[2])
local served = redis.call('HMGET', KEYS[1], 'status', 'final_level')
local false_green = 0
if served[1] == 'done' and served[2] == 'green' and ARGV[3] ~= 'green' then
  false_green = redis.call('HSETNX', KEYS[1], 'false_green_counted', '1')
end
return {1, false_green}
"""
