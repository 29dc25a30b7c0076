// The two Lua scripts the Redis state runs: one load (a consistent read of what resolve and commit need)
// and one compare-and-swap commit. Text only; what they mean for the model is decided in TypeScript.
//
// Keys, all under the prefix P: r:ID request node (JSON), c:ID conversation (JSON), v:ID conversation
// version (integer), e:TRANSCRIPT requests ending there (list), pb:TTL:HOUR the requests passing through
// message ends, written in that hour by requests kept TTL seconds (a hash: transcript -> "request
// cacheKey unixSeconds"; one write per request however long its history), pclasses the TTLs in use,
// l:LABEL the label's latest request, f:ID a request's fix document (its forwarded pair and the hashes
// of its fixes' states), s:HASH one fix state (JSON) shared by every request that left the same,
// t:LABEL written beside every load under the label (its only use: an invalidation for the other proxies).
// Arguments are flat lists, so no script decodes JSON it was sent.

/**
 * Shared by both scripts: P (the prefix, ARGV[1]), reading a list from ARGV position `i` (a count, then
 * that many values), Redis's clock, and the latest passing entry of a transcript.
 */
const LISTS = `
local P = ARGV[1]
local function list(i)
  local n = tonumber(ARGV[i])
  local out = {}
  for k = 1, n do out[k] = ARGV[i + k] end
  return out, i + n + 1
end
local function nowSeconds()
  return tonumber(redis.call('TIME')[1])
end
local passClasses, passHour
-- The latest request passing through t: newest hour first in each TTL class, the latest of the classes.
local function passingOf(t)
  if not passClasses then
    passClasses = redis.call('SMEMBERS', P .. 'pclasses')
    passHour = math.floor(nowSeconds() / 3600)
  end
  local best, bestAt = false, -1
  for _, c in ipairs(passClasses) do
    for h = passHour, passHour - math.ceil(tonumber(c) / 3600), -1 do
      local v = redis.call('HGET', P .. 'pb:' .. c .. ':' .. h, t)
      if v then
        local at = tonumber(string.match(v, '(%d+)$'))
        if at > bestAt then best, bestAt = v, at end
        break
      end
    end
  end
  return best
end
`;

/**
 * ARGV: prefix, label ('' with no label), '1' to bring fix documents, then lists (a count, then the
 * values): the transcripts to walk (last message end first: endings and passing entries are read until a
 * message end that a request of the same label ended at), then requests, conversations, endings,
 * passing entries, labels and fix documents asked for by name, the state parts the caller holds, and
 * state parts asked for by hash. Every request read brings its conversation (and version), its parent,
 * the parent's next and its own next. Returns `[json, 'f', id, doc, 's', hash, json, …]` (absent: '').
 */
export const LOAD_SCRIPT = `${LISTS}
local label = ARGV[2]
local hasLabel = label ~= ''
local wantFix = ARGV[3] == '1'
local walk, i = list(4)
local askR, askC, askE, askP, askL, askF
askR, i = list(i)
askC, i = list(i)
askE, i = list(i)
askP, i = list(i)
askL, i = list(i)
askF, i = list(i)
local have, askS
have, i = list(i)
askS, i = list(i)
local haveSet = {}
for _, h in ipairs(have) do haveSet[h] = true end
local out = { r = {}, c = {}, v = {}, e = {}, p = {}, l = {} }
local decoded = {}
local fixSeen = {}
local fixes = {}
local function version(id)
  if out.v[id] == nil then out.v[id] = tonumber(redis.call('GET', P .. 'v:' .. id) or '0') end
end
local function conv(id)
  if out.c[id] == nil then
    out.c[id] = redis.call('GET', P .. 'c:' .. id) or false
    version(id)
  end
end
local function node(id)
  if out.r[id] == nil then
    local doc = redis.call('GET', P .. 'r:' .. id)
    out.r[id] = doc or false
    if doc then
      local n = cjson.decode(doc)
      decoded[id] = n
      conv(n.conversation)
    end
  end
  return decoded[id]
end
local function expand(id)
  local n = node(id)
  if not n then return nil end
  if n.parent then
    local pp = node(n.parent)
    if pp and pp.next then node(pp.next) end
  end
  if n.next then node(n.next) end
  return n
end
local partSeen = {}
local function part(h)
  if partSeen[h] then return end
  partSeen[h] = true
  table.insert(fixes, 's')
  table.insert(fixes, h)
  table.insert(fixes, redis.call('GET', P .. 's:' .. h) or '')
end
-- A request's fix document, and the parts it names that the caller does not hold already.
local function fix(id)
  if fixSeen[id] then return end
  fixSeen[id] = true
  local doc = redis.call('GET', P .. 'f:' .. id) or ''
  table.insert(fixes, 'f')
  table.insert(fixes, id)
  table.insert(fixes, doc)
  local head = string.match(doc, '^v2\\n([^\\n]*)')
  if head then
    for h in string.gmatch(head, '=(%x+)') do
      if not haveSet[h] then part(h) end
    end
  end
end
local function sameLabel(n)
  if hasLabel then return n.label == label end
  return n.label == nil
end
local passFix = false
for _, t in ipairs(walk) do
  local ids = redis.call('LRANGE', P .. 'e:' .. t, 0, -1)
  out.e[t] = ids
  local pass = passingOf(t)
  out.p[t] = pass
  if pass then
    local pn = expand(string.match(pass, '^(%S+)'))
    if pn and wantFix and not passFix and sameLabel(pn) then
      passFix = true
      fix(pn.id)
    end
  end
  local best = nil
  for _, id in ipairs(ids) do
    local n = expand(id)
    if n and n.final and sameLabel(n) and (best == nil or n.time >= best.time) then best = n end
  end
  if best then
    if wantFix then fix(best.id) end
    break
  end
end
if hasLabel then
  local latest = redis.call('GET', P .. 'l:' .. label)
  out.l[label] = latest or false
  if latest then expand(latest) end
end
for _, id in ipairs(askR) do expand(id) end
for _, id in ipairs(askC) do conv(id) end
for _, t in ipairs(askE) do out.e[t] = redis.call('LRANGE', P .. 'e:' .. t, 0, -1) end
for _, t in ipairs(askP) do out.p[t] = passingOf(t) end
for _, l in ipairs(askL) do out.l[l] = redis.call('GET', P .. 'l:' .. l) or false end
for _, id in ipairs(askF) do fix(id) end
for _, h in ipairs(askS) do part(h) end
local reply = { cjson.encode(out) }
for _, x in ipairs(fixes) do table.insert(reply, x) end
return reply
`;

/**
 * ARGV: prefix, TTL in seconds, the request's id and fix document ('' for none), its passing entries
 * packed in one string ("transcript request cacheKey" lines), then lists (a count of values, then the
 * values): new state parts (hash, JSON), parts to keep alive (hash), checks (conversation, version),
 * request documents (id, JSON), conversation documents (id, JSON), endings (transcript, request),
 * labels (label, request), transcripts taken to end no request and transcripts taken to have no
 * passing entry (a request resolved on the proxy's cached copy). If every checked conversation is still
 * at its version and those transcripts are still unused, writes everything, bumps those versions and
 * returns `{1}`; else writes nothing and returns `{0, conversation}`. Shared keys keep the longer of their remaining life and the TTL.
 */
export const COMMIT_SCRIPT = `${LISTS}
local ttl = tonumber(ARGV[2])
local id = ARGV[3]
local fixDoc = ARGV[4]
local passing = ARGV[5]
local parts, i = list(6)
local touch, checks, docsR, docsC, ends, labels
touch, i = list(i)
checks, i = list(i)
docsR, i = list(i)
docsC, i = list(i)
ends, i = list(i)
labels, i = list(i)
local absentE, absentP
absentE, i = list(i)
absentP, i = list(i)
for k = 1, #checks, 2 do
  local v = tonumber(redis.call('GET', P .. 'v:' .. checks[k]) or '0')
  if v ~= tonumber(checks[k + 1]) then return { 0, checks[k] } end
end
-- A request resolved on this proxy's copy took its new turn's transcript keys to be unused: verify.
for _, t in ipairs(absentE) do
  if redis.call('EXISTS', P .. 'e:' .. t) == 1 then return { 0, checks[1] or '' } end
end
for _, t in ipairs(absentP) do
  if passingOf(t) then return { 0, checks[1] or '' } end
end
local function life(key)
  local left = redis.call('TTL', key)
  if left > ttl then return left end
  return ttl
end
local function put(key, v) redis.call('SET', key, v, 'EX', life(key)) end
if id ~= '' and fixDoc ~= '' then redis.call('SET', P .. 'f:' .. id, fixDoc, 'EX', ttl) end
-- Fix states by content: new ones written, ones the parent had already kept alive as long.
for k = 1, #parts, 2 do put(P .. 's:' .. parts[k], parts[k + 1]) end
for _, h in ipairs(touch) do
  local key = P .. 's:' .. h
  if redis.call('TTL', key) < ttl then redis.call('EXPIRE', key, ttl) end
end
for k = 1, #checks, 2 do
  local key = P .. 'v:' .. checks[k]
  local keep = life(key)
  redis.call('INCR', key)
  redis.call('EXPIRE', key, keep)
end
for k = 1, #docsR, 2 do put(P .. 'r:' .. docsR[k], docsR[k + 1]) end
for k = 1, #docsC, 2 do put(P .. 'c:' .. docsC[k], docsC[k + 1]) end
for k = 1, #ends, 2 do
  local key = P .. 'e:' .. ends[k]
  local keep = life(key)
  redis.call('LREM', key, 0, ends[k + 1])
  redis.call('RPUSH', key, ends[k + 1])
  redis.call('LTRIM', key, -8, -1)
  redis.call('EXPIRE', key, keep)
end
-- Passing entries: one hash field each, in this hour's bucket of this TTL (a bucket lives an hour more).
local now = nowSeconds()
local bucket = P .. 'pb:' .. ttl .. ':' .. math.floor(now / 3600)
local fields = {}
local stamp = ' ' .. now
for t, v in string.gmatch(passing, '(%S+) ([^\\n]+)') do
  fields[#fields + 1] = t
  fields[#fields + 1] = v .. stamp
  if #fields >= 1000 then
    redis.call('HSET', bucket, unpack(fields))
    fields = {}
  end
end
if #fields > 0 then redis.call('HSET', bucket, unpack(fields)) end
redis.call('EXPIRE', bucket, ttl + 3600)
redis.call('SADD', P .. 'pclasses', ttl)
if redis.call('TTL', P .. 'pclasses') < ttl + 3600 then redis.call('EXPIRE', P .. 'pclasses', ttl + 3600) end
for k = 1, #labels, 2 do put(P .. 'l:' .. labels[k], labels[k + 1]) end
return { 1 }
`;

/**
 * KEYS[1] the instances sorted set, ARGV[1] this instance (JSON), ARGV[2] how long a silent instance
 * counts as alive (ms). Times are Redis's own clock, so proxies on different machines agree.
 * Returns `{now, {member, score, …}}`.
 */
export const HEARTBEAT_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], 60000)
return { now, redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES') }
`;
