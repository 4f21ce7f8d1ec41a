--[[
  One atomic step of a provider's circuit breaker (docs/architecture.md "Circuit breakers": opens after N consecutive
  failures or when a failure share of enough requests in a window is reached; open time grows with
  consecutive openings and is jittered; one half-open probe at a time). The state is shared, so
  every replica sees one breaker. memory-cache.store.ts implements the same steps.

  State: a hash at KEYS[1]
    st        0 closed, 1 open (half-open = open with the open time over; not stored separately)
    cf        consecutive failures
    op        consecutive openings (reset by a successful probe)
    ou        end of the open time, ms since the epoch
    pu        end of the half-open probe lease, ms (0 = no probe out)
    n<i> f<i> requests and failures in time bucket i (i = floor(now / bucketMs)) while closed

  Input:
    KEYS[1]    the breaker, e.g. cb:{provider:openai}
    ARGV[1]    step: acquire | success | failure | probe_success | probe_failure | probe_release | state
    ARGV[2]    now in ms since the epoch, or '' for the server's clock (TIME)
    ARGV[3]    failureThreshold   consecutive failures that open (>= 1)
    ARGV[4]    windowMs           failure-rate window (>= 1)
    ARGV[5]    buckets            the window is kept as this many buckets (>= 1)
    ARGV[6]    minRequests        requests in the window before the rate rule applies (>= 1)
    ARGV[7]    failureRatio       share of failures that opens, in (0, 1]
    ARGV[8]    baseOpenMs         open time of the first opening
    ARGV[9]    maxOpenMs          cap of the open time before jitter
    ARGV[10]   jitter             open time scaled by 1 + jitter * (2 * random - 1)
    ARGV[11]   random             caller's uniform draw in [0, 1)
    ARGV[12]   probeLeaseMs       how long a probe lease holds
    ARGV[13]   ttlMs              the hash expires this long after its last write (plus open time)
    ARGV[14]   repeat             success only: the step taken this many times in a row (>= 1;
                                  absent = 1), each counted and checked as if it came alone

  Steps:
    acquire        closed: permit allow. Open, open time running: reject. Open time over
                   (half-open): the caller gets the probe lease (permit probe) unless an unexpired
                   lease is out (reject).
    success        closed: consecutive failures reset, one request counted (`repeat` times, the rate
                   rule checked after each; once one opens the breaker the rest do nothing).
                   Otherwise nothing: only a probe closes the breaker.
    failure        closed: consecutive failures + 1, one failed request counted. Otherwise nothing.
                   After either, a closed breaker opens when consecutive failures >=
                   failureThreshold, or requests >= minRequests and failures / requests >=
                   failureRatio in the window.
    probe_success  half-open: closes (openings, consecutive failures and window reset). Closed: as
                   success. Open with the open time running (another probe re-opened it): nothing.
    probe_failure  half-open: opens again, one opening more (so for longer). Closed: as failure.
                   Open with the open time running: nothing.
    probe_release  the probe ended with no verdict (its client went away): half-open with a lease
                   out, the lease is cleared so the next acquire probes at once. Counts neither a
                   success nor a failure; in any other state, nothing. The lease names no holder, so
                   a probe that outlived its lease releases its successor's (as its late report
                   would decide for it).
    state          reads only.
  Opening: openings + 1; open time = floor(min(maxOpenMs, baseOpenMs * 2^(openings - 1)) *
  (1 + jitter * (2 * random - 1))), at least 1 ms; the window and any probe lease are cleared.

  Output:
    { state, permit, openUntil, consecutiveFailures, openings, opened }
      state       0 closed, 1 open, 2 half-open (after this step)
      permit      acquire: 1 allow, 2 probe, 3 reject; other steps 0
      openUntil   ms, 0 while closed
      opened      1 when this step opened or re-opened the breaker, else 0
]]

local key = KEYS[1]
local step = ARGV[1]
local now
if ARGV[2] == '' then
  -- Server time, so replicas with skewed clocks agree on when the open time ends.
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[2])
end
local threshold = tonumber(ARGV[3])
local windowMs = tonumber(ARGV[4])
local buckets = tonumber(ARGV[5])
local minRequests = tonumber(ARGV[6])
local ratio = tonumber(ARGV[7])
local baseOpen = tonumber(ARGV[8])
local maxOpen = tonumber(ARGV[9])
local jitter = tonumber(ARGV[10])
local random = tonumber(ARGV[11])
local lease = tonumber(ARGV[12])
local ttl = tonumber(ARGV[13])
local repeats = tonumber(ARGV[14] or '1')

-- Integers as text without an exponent (redis.call would print large Lua numbers with 14 digits).
local function int(x)
  return string.format('%.0f', x)
end

local raw = redis.call('HGETALL', key)
local h = {}
for i = 1, #raw, 2 do
  h[raw[i]] = raw[i + 1]
end
local st = tonumber(h['st'] or '0')
local cf = tonumber(h['cf'] or '0')
local openings = tonumber(h['op'] or '0')
local openUntil = tonumber(h['ou'] or '0')
local probeUntil = tonumber(h['pu'] or '0')

local bucketMs = math.max(1, math.floor(windowMs / buckets))
local current = math.floor(now / bucketMs)
local oldest = current - buckets + 1

-- Buckets: live ones summed, stale ones marked for deletion.
local requests, failures = 0, 0
local stale = {}
for field, value in pairs(h) do
  local kind, idx = string.match(field, '^([nf])(%-?%d+)$')
  if kind then
    if tonumber(idx) < oldest then
      stale[#stale + 1] = field
    elseif kind == 'n' then
      requests = requests + tonumber(value)
    else
      failures = failures + tonumber(value)
    end
  end
end

local dirty = false
local clearWindow = false
local opened = 0
local permit = 0
local bumpN, bumpF = 0, 0

local function open()
  openings = openings + 1
  local exponent = math.min(openings - 1, 40)
  local duration = math.min(maxOpen, baseOpen * math.pow(2, exponent))
  duration = math.max(1, math.floor(duration * (1 + jitter * (2 * random - 1))))
  st = 1
  openUntil = now + duration
  probeUntil = 0
  clearWindow = true
  opened = 1
  dirty = true
end

local function close()
  st = 0
  cf = 0
  openings = 0
  openUntil = 0
  probeUntil = 0
  clearWindow = true
  dirty = true
end

-- The rate rule is checked after every counted request, a success included: 16 failures of 20 open
-- the breaker whichever of them came last.
local function count(failed)
  bumpN = bumpN + 1
  if failed then bumpF = bumpF + 1 end
  dirty = true
  local n = requests + bumpN
  local f = failures + bumpF
  if cf >= threshold or (n >= minRequests and f >= ratio * n) then
    open()
  end
end

local function closedSuccess()
  cf = 0
  count(false)
end

local function closedFailure()
  cf = cf + 1
  count(true)
end

local halfOpen = st == 1 and now >= openUntil

if step == 'acquire' then
  if st == 0 then
    permit = 1
  elseif not halfOpen then
    permit = 3
  elseif probeUntil > now then
    permit = 3
  else
    probeUntil = now + lease
    permit = 2
    dirty = true
  end
elseif step == 'success' then
  for _ = 1, repeats do
    if st ~= 0 then break end
    closedSuccess()
  end
elseif step == 'failure' then
  if st == 0 then closedFailure() end
elseif step == 'probe_success' then
  if st == 0 then
    closedSuccess()
  elseif halfOpen then
    close()
  end
elseif step == 'probe_failure' then
  if st == 0 then
    closedFailure()
  elseif halfOpen then
    cf = cf + 1
    open()
  end
elseif step == 'probe_release' then
  if halfOpen and probeUntil > now then
    probeUntil = 0
    dirty = true
  end
elseif step ~= 'state' then
  return redis.error_reply('ERR unknown breaker step ' .. step)
end

if dirty then
  redis.call('HSET', key, 'st', st, 'cf', cf, 'op', openings, 'ou', int(openUntil), 'pu', int(probeUntil))
  if clearWindow then
    for field, _ in pairs(h) do
      if string.match(field, '^[nf]%-?%d+$') then stale[#stale + 1] = field end
    end
  else
    if bumpN > 0 then redis.call('HINCRBY', key, 'n' .. int(current), bumpN) end
    if bumpF > 0 then redis.call('HINCRBY', key, 'f' .. int(current), bumpF) end
  end
  if #stale > 0 then redis.call('HDEL', key, unpack(stale)) end
  redis.call('PEXPIRE', key, int(ttl + math.max(0, openUntil - now)))
end

local state = 0
if st == 1 then
  state = (now >= openUntil) and 2 or 1
end
return { state, permit, openUntil, cf, openings, opened }
