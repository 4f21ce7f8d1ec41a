--[[
  Checks several sliding-window limits and spends them in one atomic step (explain's rate limit,
  docs/api.md "POST /v1/routing/explain": 30/min per org and 10/min per key, a denied request
  spends neither).

  Each window is an exact sliding log: a sorted set whose members are hits and whose scores are
  the hit times in milliseconds. A hit counts while it is younger than the window.

  Input:
    KEYS[1..n]      one sorted set per window; all must share one hash tag such as {org:acme}
                    (Redis Cluster runs a script on one slot) and must be distinct.
    ARGV[2i-1]      limit of window i: at most this many hits in the window (integer >= 0)
    ARGV[2i]        length of window i in milliseconds (integer >= 1)
    ARGV[2n+1]      member for this hit, unique per call across every replica

  Output:
    { allowed (1|0), retryAfterMs, deniedIndex, count_1, ..., count_n }
      allowed       1 when every window had room and one hit was recorded in each, else 0 and
                    nothing was written
      retryAfterMs  when denied: ms until the oldest hit of the first denying window leaves it (>= 1);
                    0 when allowed
      deniedIndex   0-based index of the first denying window, -1 when allowed
      count_i       hits in window i after this call
]]

-- Server time, not the caller's: every replica and the Redis replicas agree on one clock, and
-- Redis 7 replicates the script's effects, so a non-deterministic TIME is safe.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
-- redis.call turns Lua numbers into strings with 14 significant digits, too few for epoch ms
-- with a fraction; format scores explicitly.
local function score(ms)
  return string.format('%.3f', ms)
end

local n = #KEYS
local counts = {}
local deniedIndex = -1
local retryAfter = 0

for i = 1, n do
  local limit = tonumber(ARGV[2 * i - 1])
  local window = tonumber(ARGV[2 * i])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', score(now - window))
  local count = redis.call('ZCARD', KEYS[i])
  counts[i] = count
  if deniedIndex == -1 and count >= limit then
    deniedIndex = i - 1
    local oldest = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
    if oldest[2] then
      retryAfter = math.max(1, math.ceil(tonumber(oldest[2]) + window - now))
    else
      -- A zero limit never frees a slot; one window is the honest lower bound to report.
      retryAfter = window
    end
  end
end

if deniedIndex == -1 then
  local member = ARGV[2 * n + 1]
  for i = 1, n do
    redis.call('ZADD', KEYS[i], score(now), member)
    -- The log goes when its newest hit leaves the window (the newest by score, should TIME step back).
    local newest = redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')
    redis.call('PEXPIREAT', KEYS[i], string.format('%.0f', math.ceil(tonumber(newest[2]) + tonumber(ARGV[2 * i]))))
    counts[i] = counts[i] + 1
  end
end

local result = { deniedIndex == -1 and 1 or 0, retryAfter, deniedIndex }
for i = 1, n do
  result[3 + i] = counts[i]
end
return result
