-- Argo CD health check for ray.io RayCluster (KubeRay).
-- Install as resource.customizations.health.ray.io_RayCluster in argocd-cm;
-- argocd-cm-ray-health.yaml next to this file holds exactly this text.
--
-- Same verdicts and messages as gitops-ray (gitops_ray/health/ray.py); its tests run both
-- on the same objects. One rule exists only in gitops-ray: KubeRay writes no status for a
-- spec it rejects, only a Warning Event (InvalidRayClusterSpec), and Argo CD's Lua cannot
-- read Events. Here such a cluster stays Progressing ("Waiting for the KubeRay operator
-- ..."); gitops-ray reports it Degraded with the Event's message.
--
-- Plain Lua 5.1 (Argo CD embeds gopher-lua) using only the base and table libraries:
-- Argo CD opens string, math and the other standard libraries for a custom check only
-- when resource.customizations.useOpenLibs.<group>_<kind> is "true", and this check does
-- not need them.

local OPERATOR = "ray.io/kuberay-operator"

local function text(value)
  if type(value) == "string" then return value end
  return ""
end

local function number(value)
  if type(value) == "number" and value % 1 == 0 then return value end
  return nil
end

local function field(tbl, key)
  if type(tbl) == "table" then return tbl[key] end
  return nil
end

local function verdict(status, message)
  return {status = status, message = message}
end

local function joined(summary, detail)
  if detail ~= "" then return summary .. ": " .. detail end
  return summary
end

local function conditions(status)
  local found = {}
  local list = field(status, "conditions")
  if type(list) ~= "table" then return found end
  for _, c in ipairs(list) do
    if type(c) == "table" then table.insert(found, c) end
  end
  return found
end

local function condition(status, kind)
  for _, c in ipairs(conditions(status)) do
    if c.type == kind then return c end
  end
  return nil
end

local function is_true(c)
  return c ~= nil and c.status == "True"
end

local function describe(c)
  if c == nil then return "" end
  local reason, message = text(c.reason), text(c.message)
  if reason ~= "" and message ~= "" then return reason .. ": " .. message end
  return reason .. message
end

local function is_empty(tbl)
  return type(tbl) ~= "table" or next(tbl) == nil
end

-- " (ready/desired workers ready)" when the operator reports a desired worker count.
local function workers(status)
  local desired = number(field(status, "desiredWorkerReplicas"))
  if desired == nil or desired <= 0 then return "" end
  local ready = number(field(status, "readyWorkerReplicas")) or 0
  return " (" .. ready .. "/" .. desired .. " workers ready)"
end

-- Progressing until the operator has written a status. A lagging observedGeneration
-- is no sign of work in progress: KubeRay writes its status only when another status
-- field changes, so after an edit that changes none it lags for good.
local function unobserved(obj, status)
  if is_empty(status) then
    return verdict("Progressing", "Waiting for the KubeRay operator to report status")
  end
  return nil
end

local function from_conditions(status)
  if is_true(condition(status, "RayClusterSuspended")) then
    return verdict("Suspended", "RayCluster is suspended")
  end
  if is_true(condition(status, "RayClusterSuspending")) then
    return verdict("Progressing", "RayCluster is suspending")
  end
  local failure = condition(status, "ReplicaFailure")
  if is_true(failure) then
    local message = describe(failure)
    if message == "" then message = "ReplicaFailure" end
    return verdict("Degraded", message)
  end
  if not is_true(condition(status, "RayClusterProvisioned")) then
    return verdict("Progressing",
      "Waiting for all Ray pods to be running and ready" .. workers(status))
  end
  local head = condition(status, "HeadPodReady")
  if not is_true(head) then
    return verdict("Degraded", joined("Head pod is not ready", describe(head)))
  end
  return verdict("Healthy", "RayCluster is ready" .. workers(status))
end

-- Fallback for operators without status conditions: the deprecated status.state.
local function from_state(status)
  local state = text(status.state)
  if state == "suspended" then return verdict("Suspended", "RayCluster is suspended") end
  if state == "ready" then
    return verdict("Healthy", "RayCluster is ready" .. workers(status))
  end
  if state == "failed" then
    return verdict("Degraded", joined("RayCluster failed", text(status.reason)))
  end
  return verdict("Progressing", "Waiting for the RayCluster to become ready" .. workers(status))
end

local function assess(obj)
  local owner = text(field(obj.spec, "managedBy"))
  if owner ~= "" and owner ~= OPERATOR then
    return verdict("Unknown",
      "RayCluster is managed by " .. owner .. ", not by the KubeRay operator")
  end
  local status = obj.status
  local pending = unobserved(obj, status)
  if pending ~= nil then return pending end
  if #conditions(status) > 0 then return from_conditions(status) end
  return from_state(status)
end

return assess(obj)
