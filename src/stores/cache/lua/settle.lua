--[[
  Settles what spend.lua charged up front once the answer says what it cost: a hit's estimated
  cost is replaced by the real one, at the hit's own time, and a counter is moved by the
  difference. One atomic step, so a window's sum always equals the costs of its hits.

  Input:
    KEYS[2i-1], KEYS[2i]   window i (1..nw): its sorted set and its sum key (as spend.lua)
    KEYS[2nw+j]            counter j (1..nc)
                           every key shares one hash tag
    ARGV[1], ARGV[2]       nw, nc
    then per window        the hit id, the cost it was spent with, the real cost
    then per counter       delta (an integer, may be negative)

  A hit that already left its window, and a counter that no longer exists (expired, or lost with
  the cache), are left alone: there is nothing of them to correct. A counter never goes below 0.

  Output: 1
]]

local function int(n)
  return string.format('%d', n)
end

local nw = tonumber(ARGV[1])
local nc = tonumber(ARGV[2])
local a = 3

for i = 1, nw do
  local log, sumKey = KEYS[2 * i - 1], KEYS[2 * i]
  local hit, from, to = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  a = a + 3
  local old = hit .. '|' .. int(from)
  local at = redis.call('ZSCORE', log, old)
  if at and from ~= to then
    redis.call('ZREM', log, old)
    redis.call('ZADD', log, at, hit .. '|' .. int(to))
    -- INCRBY keeps the key's expiry; a lost sum key is rebuilt from the log by the next spend.
    if redis.call('EXISTS', sumKey) == 1 then
      redis.call('INCRBY', sumKey, int(to - from))
    end
  end
end

for j = 1, nc do
  local key = KEYS[2 * nw + j]
  local delta = tonumber(ARGV[a])
  a = a + 1
  if delta ~= 0 and redis.call('EXISTS', key) == 1 then
    local value = redis.call('INCRBY', key, int(delta))
    if value < 0 then
      redis.call('INCRBY', key, int(-value))
    end
  end
end

return 1
