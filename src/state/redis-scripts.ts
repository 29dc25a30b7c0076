// The two Lua scripts the Redis state runs: one load (a consistent read of what resolve and commit need)
// and one compare-and-swap commit. Text only; what they mean for the model is decided in TypeScript.
//
// Keys, all under the prefix P: r:ID request node (JSON), c:ID conversation (JSON), v:ID conversation
// version (integer), e:TRANSCRIPT requests ending there (list), p:TRANSCRIPT request passing through
// (JSON), l:LABEL the label's latest request, f:ID a request's fix state and forwarded pair (JSON).

/**
 * ARGV[1] prefix, ARGV[2] a JSON spec: `walk` (transcripts, last message end first: read endings and
 * passing entries until a message end that a request of the same `label` ended at), and explicit lists
 * `r`, `c`, `e`, `p`, `l`, `f`. Every request read brings its conversation (and version), its parent, the
 * parent's next and its own next. Returns `[json, fixId1, fixDoc1, …]` (an absent fix doc is '').
 */
export const LOAD_SCRIPT = `
local P = ARGV[1]
local spec = cjson.decode(ARGV[2])
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
local function fix(id)
  if fixSeen[id] then return end
  fixSeen[id] = true
  table.insert(fixes, id)
  table.insert(fixes, redis.call('GET', P .. 'f:' .. id) or '')
end
local label = spec.label
if spec.walk then
  local passFix = false
  for _, t in ipairs(spec.walk) do
    local ids = redis.call('LRANGE', P .. 'e:' .. t, 0, -1)
    out.e[t] = ids
    local pass = redis.call('GET', P .. 'p:' .. t)
    out.p[t] = pass or false
    if pass then
      local pn = expand(cjson.decode(pass).request)
      if pn and not spec.nofix and not passFix and pn.label == label then
        passFix = true
        fix(pn.id)
      end
    end
    local best = nil
    for _, id in ipairs(ids) do
      local n = expand(id)
      if n and n.final and n.label == label and (best == nil or n.time >= best.time) then best = n end
    end
    if best then
      if not spec.nofix then fix(best.id) end
      break
    end
  end
end
if label ~= nil then
  local latest = redis.call('GET', P .. 'l:' .. label)
  out.l[label] = latest or false
  if latest then expand(latest) end
end
for _, id in ipairs(spec.r or {}) do expand(id) end
for _, id in ipairs(spec.c or {}) do conv(id) end
for _, t in ipairs(spec.e or {}) do out.e[t] = redis.call('LRANGE', P .. 'e:' .. t, 0, -1) end
for _, t in ipairs(spec.p or {}) do out.p[t] = redis.call('GET', P .. 'p:' .. t) or false end
for _, l in ipairs(spec.l or {}) do out.l[l] = redis.call('GET', P .. 'l:' .. l) or false end
for _, id in ipairs(spec.f or {}) do fix(id) end
local reply = { cjson.encode(out) }
for _, x in ipairs(fixes) do table.insert(reply, x) end
return reply
`;

/**
 * ARGV[1] prefix, ARGV[2] TTL in seconds, ARGV[3] the writes as JSON (`checks` [conversation, version],
 * `r` [id, doc], `c` [id, doc], `e` [transcript, id], `p` [transcript, doc], `l` [label, id]), ARGV[4]
 * and ARGV[5] the request's id and fix document ('' for none). If every checked conversation is still at
 * its version, writes everything, bumps those versions and returns `{1}`; else writes nothing and returns
 * `{0, conversation}`. Keys keep the longer of their remaining life and the TTL.
 */
export const COMMIT_SCRIPT = `
local P = ARGV[1]
local ttl = tonumber(ARGV[2])
local w = cjson.decode(ARGV[3])
for _, c in ipairs(w.checks) do
  local v = tonumber(redis.call('GET', P .. 'v:' .. c[1]) or '0')
  if v ~= c[2] then return { 0, c[1] } end
end
local function life(k)
  local left = redis.call('TTL', k)
  if left > ttl then return left end
  return ttl
end
local function put(k, v) redis.call('SET', k, v, 'EX', life(k)) end
if ARGV[4] ~= '' and ARGV[5] ~= '' then redis.call('SET', P .. 'f:' .. ARGV[4], ARGV[5], 'EX', ttl) end
for _, c in ipairs(w.checks) do
  local k = P .. 'v:' .. c[1]
  local keep = life(k)
  redis.call('INCR', k)
  redis.call('EXPIRE', k, keep)
end
for _, r in ipairs(w.r) do put(P .. 'r:' .. r[1], r[2]) end
for _, c in ipairs(w.c) do put(P .. 'c:' .. c[1], c[2]) end
for _, e in ipairs(w.e) do
  local k = P .. 'e:' .. e[1]
  local keep = life(k)
  redis.call('LREM', k, 0, e[2])
  redis.call('RPUSH', k, e[2])
  redis.call('LTRIM', k, -8, -1)
  redis.call('EXPIRE', k, keep)
end
for _, p in ipairs(w.p) do put(P .. 'p:' .. p[1], p[2]) end
for _, l in ipairs(w.l) do put(P .. 'l:' .. l[1], l[2]) end
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
