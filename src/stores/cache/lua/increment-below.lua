--[[
  Atomic check-and-count (the monthly limit): increments a counter unless that would take
  it past the limit, so concurrent replicas can never overshoot.

  Input:
    KEYS[1]   the counter (a string holding an integer); prefix it with the organisation's hash
              tag like every other key, e.g. ml:{org:acme}:2025-06
    ARGV[1]   limit: the counter never exceeds it (integer >= 0)
    ARGV[2]   time to live in ms, set when the counter is created (integer >= 1)

  Output:
    { allowed (1|0), value }
      allowed   1 when the counter was incremented, 0 when it was already at the limit
      value     the counter after this call (unchanged when denied; 0 when it does not exist)
]]

local limit = tonumber(ARGV[1])
local current = redis.call('GET', KEYS[1])
local value = 0
if current then
  if not string.match(current, '^%-?%d+$') then
    return redis.error_reply('ERR value is not an integer or out of range')
  end
  value = tonumber(current)
end

if value >= limit then
  return { 0, value }
end

value = redis.call('INCR', KEYS[1])
-- Also repairs a counter that somehow lost its expiry: without one it would never reset.
if redis.call('PTTL', KEYS[1]) < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return { 1, value }
