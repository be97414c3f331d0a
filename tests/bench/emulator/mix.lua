-- wrk script: the worker's happy path against the emulator, as a request mix.
-- A session is claimed (capacity 1), its transcript and definitions fetched,
-- its one definition planned and a result submitted: five calls. Responses
-- are recognized by their content, so any number of connections per thread
-- works.
-- Env: EMU_TOKEN, EMU_WORKER (registered beforehand by run.py).

local token = os.getenv("EMU_TOKEN") or "emulator-token"
local worker = os.getenv("EMU_WORKER") or "bench"
local queue = {}

local function headers(extra)
  local h = {["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json",
             ["Accept"] = "application/json"}
  for k, v in pairs(extra or {}) do h[k] = v end
  return h
end

local claim_body = '{"protocol_version":"2","worker_id":"' .. worker ..
  '","catalog_revision":"' .. (os.getenv("EMU_REVISION") or "") .. '","capacity":1}'

request = function()
  local item = table.remove(queue, 1)
  if item then return item end
  return wrk.format("POST", "/v1/evaluator/assignments/claim", headers(), claim_body)
end

local gens = {}

local function fenced_get(id, what)
  local fence = {["X-FailproofAI-Worker-Id"] = worker, ["X-FailproofAI-Lease-Generation"] = gens[id]}
  return wrk.format("GET", "/v1/evaluator/assignments/" .. id .. "/" .. what, headers(fence))
end

-- Each session's calls are chained (the next one is queued when the previous
-- answer arrives), as a worker makes them; sessions interleave freely.
response = function(status, hdrs, body)
  if status ~= 200 then
    if os.getenv("EMU_DEBUG") then io.stderr:write(status .. " " .. body .. "\n") end
    return
  end
  if body:find('"assignments":%[', 1) then
    for id, gen in body:gmatch('"assignment_id":"([%w%-]+)","lease_generation":(%d+)') do
      gens[id] = gen
      table.insert(queue, fenced_get(id, "transcript"))
    end
  elseif body:find('{"schema_version"', 1, true) == 1 then
    local id = body:match('"assignment_id":"([%w%-]+)"')
    table.insert(queue, fenced_get(id, "definitions"))
  elseif body:find('"catalog_revision"', 1, true) then
    local id = body:match('"assignment_id":"([%w%-]+)"')
    table.insert(queue, wrk.format("POST", "/v1/evaluator/assignments/" .. id .. "/plan", headers(),
      '{"protocol_version":"2","worker_id":"' .. worker .. '","lease_generation":' .. gens[id] ..
      ',"selected":[{"eval_key":"q","eval_version":"1"}],"skipped":[]}'))
  elseif body:find('"assignment_status":"planned"', 1, true) then
    local id = body:match('"assignment_id":"([%w%-]+)"')
    local run = body:match('"evaluation_run_id":"([%w%-]+)"')
    table.insert(queue, wrk.format("POST", "/v1/evaluator/runs/" .. run .. "/result", headers(),
      '{"protocol_version":"2","result_schema_version":"2","submission_id":"' .. run .. '-s' ..
      '","worker_id":"' .. worker .. '","lease_generation":' .. gens[id] .. ',"status":"succeeded",' ..
      '"started_at":"2026-08-28T12:00:10.000000Z","finished_at":"2026-08-28T12:00:10.812000Z",' ..
      '"duration_ms":812,"summary":null,"results":[{"result_key":"q","result_kind":"score",' ..
      '"numeric_value":0.92,"bool_value":true,"text_value":null,"unit":"ratio","display_value":"92%",' ..
      '"description":null,"reasoning":null,"labels":[]}],"error_code":null,"error_message":null}'))
    gens[id] = nil
  end
end
