-- Argo CD health check for ray.io RayService (KubeRay).
-- Install as resource.customizations.health.ray.io_RayService in argocd-cm;
-- argocd-cm-ray-health.yaml next to this file holds exactly this text.
--
-- Same verdicts and messages as gitops-ray (gitops_ray/health/ray.py); its tests run both
-- on the same objects. Conditions first (KubeRay >= 1.3): Ready=True is Healthy, Ready=False
-- because no endpoint serves (ZeroServeEndpoints, InitializingTimeout) is Degraded, an
-- upgrade or rollback in progress is Progressing. Older operators: status.serviceStatus.
--
-- Plain Lua 5.1 (Argo CD embeds gopher-lua) using only the base and table libraries:
-- Argo CD opens string, math and the other standard libraries for a custom check only
-- when resource.customizations.useOpenLibs.<group>_<kind> is "true", and this check does
-- not need them.

local OUTAGES = {ZeroServeEndpoints = true, InitializingTimeout = true}
local LEGACY_FAILURES = {
  FailedToGetOrCreateRayCluster = true,
  FailedToGetServeDeploymentStatus = true,
  FailedToUpdateServingPodLabel = true,
  FailedToUpdateService = true,
}

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

local function endpoints(status)
  local count = number(field(status, "numServeEndpoints"))
  if count == nil or count <= 0 then return "" end
  local plural = "s"
  if count == 1 then plural = "" end
  return " (" .. count .. " serve endpoint" .. plural .. ")"
end

-- Progressing while the operator has not reported on the current generation.
local function unobserved(obj, status)
  if is_empty(status) then
    return verdict("Progressing", "Waiting for the KubeRay operator to report status")
  end
  local generation = number(field(obj.metadata, "generation"))
  local observed = number(status.observedGeneration)
  if generation ~= nil and observed ~= nil and observed < generation then
    return verdict("Progressing", "Waiting for the KubeRay operator to observe generation "
      .. generation .. " (observed " .. observed .. ")")
  end
  return nil
end

local function from_conditions(status)
  if is_true(condition(status, "Suspended")) then
    return verdict("Suspended", "RayService is suspended")
  end
  if is_true(condition(status, "Suspending")) then
    return verdict("Progressing", "RayService is suspending")
  end
  local ready = condition(status, "Ready")
  if not is_true(ready) and OUTAGES[text(field(ready, "reason"))] then
    return verdict("Degraded", joined("RayService is not serving", describe(ready)))
  end
  local upgrade = condition(status, "UpgradeInProgress")
  if is_true(upgrade) then
    return verdict("Progressing", joined("Upgrade in progress", describe(upgrade)))
  end
  local rollback = condition(status, "RollbackInProgress")
  if is_true(rollback) then
    return verdict("Progressing", joined("Rollback in progress", describe(rollback)))
  end
  if is_true(ready) then
    return verdict("Healthy", "RayService is ready" .. endpoints(status))
  end
  return verdict("Progressing",
    joined("Waiting for the RayService to be ready", describe(ready)))
end

-- Fallback for operators before conditions (KubeRay < 1.3): status.serviceStatus.
local function from_service_status(status)
  local service = text(status.serviceStatus)
  if service == "Running" then
    return verdict("Healthy", "RayService is ready" .. endpoints(status))
  end
  if LEGACY_FAILURES[service] then
    return verdict("Degraded", "RayService is " .. service)
  end
  return verdict("Progressing", joined("Waiting for the RayService to be ready", service))
end

local function assess(obj)
  local status = obj.status
  local pending = unobserved(obj, status)
  if pending ~= nil then return pending end
  if #conditions(status) > 0 then return from_conditions(status) end
  return from_service_status(status)
end

return assess(obj)
