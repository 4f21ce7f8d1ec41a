--[[
  Checks weighted sliding windows and counters of the month, and spends them in one atomic step
  (the per-key and per-organisation controls: requests and tokens per minute, the monthly request
  limit and the monthly spend budgets; docs/architecture.md "One limiter for every limit").

  A window is an exact sliding log: a sorted set whose members are `<hit>|<cost>` scored by the
  hit's time in milliseconds, and a second key holding the sum of those costs. A hit counts while it
  is younger than the window. A counter is a string holding an integer.

  Input:
    KEYS[2i-1], KEYS[2i]   window i (1..nw): its sorted set and its sum key
    KEYS[2nw+j]            counter j (1..nc)
                           every key shares one hash tag such as {org:acme} (Redis Cluster runs a
                           script on one slot)
    ARGV[1], ARGV[2]       nw, nc
    ARGV[3]                this call's hit id, unique across every replica, without '|'
    then per window        limit, window length in ms, cost (integers; cost >= 0)
    then per counter       limit, amount (>= 0), time to live in ms when created, seed (-1 = none),
                           reseed (1 = set to seed even when it exists)

  Output:
    { outcome, retryAfterMs, deniedIndex, sum_1, ..., sum_nw, value_1, ..., value_nc }
      outcome       1 allowed: every window and counter had room and each was spent
                    0 denied: a window's sum + cost, or a counter's value + amount, passes its
                      limit; nothing was spent (windows are checked first), though a counter
                      given a seed is created at it
                    2 missing: nothing denied, but a counter with no seed does not exist; nothing
                      was spent (the caller reads its durable count and calls again with a seed)
      retryAfterMs  when a window denied: ms until enough of its hits have left it for this cost
                    (>= 1; the window's length when no wait can make room); else 0
      deniedIndex   0-based index of the first denying entry (windows, then counters), or -1
      sum_i         window i's sum after the call
      value_j       counter j's value after the call; -1 for a missing one
]]

-- Server time, not the caller's: every replica agrees on one clock, and Redis 7 replicates the
-- script's effects, so a non-deterministic TIME is safe.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
-- Lua numbers reach redis.call as 14 significant digits, too few for epoch ms with a fraction.
local function score(ms)
  return string.format('%.3f', ms)
end
-- Integers as text without an exponent, whatever their size.
local function int(n)
  return string.format('%d', n)
end
local function costOf(member)
  return tonumber(string.match(member, '|(%d+)$')) or 0
end

local nw = tonumber(ARGV[1])
local nc = tonumber(ARGV[2])
local hit = ARGV[3]
local a = 4

local sums = {}
local windows = {}
local deniedIndex = -1
local retryAfter = 0

for i = 1, nw do
  local log, sumKey = KEYS[2 * i - 1], KEYS[2 * i]
  local limit, window, cost = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  a = a + 3
  windows[i] = { log = log, sumKey = sumKey, window = window, cost = cost }

  local cutoff = score(now - window)
  local gone = redis.call('ZRANGEBYSCORE', log, '-inf', cutoff)
  local stored = redis.call('GET', sumKey)
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', log, '-inf', cutoff)
  end
  local sum
  if redis.call('ZCARD', log) == 0 then
    sum = 0
    if stored then
      redis.call('DEL', sumKey)
    end
  elseif stored then
    local freed = 0
    for _, m in ipairs(gone) do
      freed = freed + costOf(m)
    end
    sum = tonumber(stored) - freed
    if freed > 0 then
      redis.call('DECRBY', sumKey, int(freed))
    end
  else
    -- The sum key was lost while the log was not: rebuilt from the log.
    sum = 0
    for _, m in ipairs(redis.call('ZRANGE', log, 0, -1)) do
      sum = sum + costOf(m)
    end
  end
  sums[i] = sum

  if deniedIndex == -1 and sum + cost > limit then
    deniedIndex = i - 1
    if cost <= limit then
      -- Oldest first: the wait until enough cost has left the window for this one to fit.
      local hits = redis.call('ZRANGE', log, 0, -1, 'WITHSCORES')
      local freed = 0
      for j = 1, #hits, 2 do
        freed = freed + costOf(hits[j])
        if sum - freed + cost <= limit then
          retryAfter = math.max(1, math.ceil(tonumber(hits[j + 1]) + window - now))
          break
        end
      end
    end
    -- A cost over the limit (or a zero limit) never fits; one window is the honest bound to report.
    if retryAfter == 0 then
      retryAfter = window
    end
  end
end

local values = {}
local counters = {}
local missing = false
for j = 1, nc do
  local key = KEYS[2 * nw + j]
  local limit, amount, ttl, seed, reseed = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), ARGV[a + 2], tonumber(ARGV[a + 3]), ARGV[a + 4] == '1'
  a = a + 5
  local value
  local create = false
  local current = redis.call('GET', key)
  if reseed then
    value, create = seed, true
  elseif current then
    if not string.match(current, '^%-?%d+$') then
      return redis.error_reply('ERR value is not an integer or out of range')
    end
    value = tonumber(current)
  elseif seed >= 0 then
    value, create = seed, true
  else
    missing = true
  end
  counters[j] = { key = key, amount = amount, ttl = ttl, create = create }
  values[j] = value or -1
  if value and deniedIndex == -1 and value + amount > limit then
    deniedIndex = nw + j - 1
  end
end

local outcome = 1
if deniedIndex ~= -1 then
  outcome = 0
  -- A seeded counter is created (or rebuilt) even when the call is refused: the durable count it
  -- carries is not read again by every refused request that follows.
  for j = 1, nc do
    local c = counters[j]
    if c.create then
      redis.call('SET', c.key, int(values[j]), 'PX', c.ttl)
    end
  end
elseif missing then
  outcome = 2
else
  for i = 1, nw do
    local w = windows[i]
    redis.call('ZADD', w.log, score(now), hit .. '|' .. int(w.cost))
    sums[i] = sums[i] + w.cost
    redis.call('SET', w.sumKey, int(sums[i]))
    -- Both keys go when the newest hit leaves the window (the newest by score, should TIME step back).
    local newest = redis.call('ZRANGE', w.log, -1, -1, 'WITHSCORES')
    local expireAt = string.format('%.0f', math.ceil(tonumber(newest[2]) + w.window))
    redis.call('PEXPIREAT', w.log, expireAt)
    redis.call('PEXPIREAT', w.sumKey, expireAt)
  end
  for j = 1, nc do
    local c = counters[j]
    values[j] = values[j] + c.amount
    if c.create then
      redis.call('SET', c.key, int(values[j]), 'PX', c.ttl)
    else
      if c.amount > 0 then
        redis.call('INCRBY', c.key, int(c.amount))
      end
      -- Also repairs a counter that somehow lost its expiry: without one it would never reset.
      if redis.call('PTTL', c.key) < 0 then
        redis.call('PEXPIRE', c.key, c.ttl)
      end
    end
  end
end

local result = { outcome, retryAfter, deniedIndex }
for i = 1, nw do
  result[#result + 1] = sums[i]
end
for j = 1, nc do
  result[#result + 1] = values[j]
end
return result
