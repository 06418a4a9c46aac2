-- Argo CD health check for ray.io RayJob (KubeRay).
-- Install as resource.customizations.health.ray.io_RayJob in argocd-cm;
-- argocd-cm-ray-health.yaml next to this file holds exactly this text.
--
-- Same verdicts and messages as gitops-ray (gitops_ray/health/ray.py); its tests run both
-- on the same objects. The verdict follows status.jobDeploymentStatus: Complete (the Ray
-- job SUCCEEDED or was STOPPED) is Healthy, Failed and ValidationFailed are Degraded,
-- Suspended is Suspended, anything else is Progressing.
--
-- Plain Lua 5.1 (Argo CD embeds gopher-lua) using only the base and table libraries:
-- Argo CD opens string, math and the other standard libraries for a custom check only
-- when resource.customizations.useOpenLibs.<group>_<kind> is "true", and this check does
-- not need them.

local FAILURES = {Failed = true, ValidationFailed = true}

local function text(value)
  if type(value) == "string" then return value end
  return ""
end

local function field(tbl, key)
  if type(tbl) == "table" then return tbl[key] end
  return nil
end

local function verdict(status, message)
  return {status = status, message = message}
end

-- "RayJob is <phase>[, Ray job <jobStatus>][: <message or reason>]"
local function describe(status, phase)
  local summary = "RayJob is " .. phase
  local job = text(field(status, "jobStatus"))
  if job ~= "" then
    summary = summary .. ", Ray job " .. job
  elseif phase == "Running" then
    -- Running means cluster up and submitter created; the Ray job's status comes later,
    -- from the head's dashboard (KubeRay v1.6.1, seen in gitops-ray's tests/e2e).
    summary = summary .. ", Ray job status not reported yet"
  end
  local detail = text(field(status, "message"))
  if detail == "" then detail = text(field(status, "reason")) end
  if detail ~= "" then return summary .. ": " .. detail end
  return summary
end

local function assess(obj)
  local status = obj.status
  local phase = text(field(status, "jobDeploymentStatus"))
  if phase == "" then
    return verdict("Progressing", "Waiting for the KubeRay operator to start the job")
  end
  local message = describe(status, phase)
  if phase == "Complete" then return verdict("Healthy", message) end
  if FAILURES[phase] then return verdict("Degraded", message) end
  if phase == "Suspended" then return verdict("Suspended", message) end
  return verdict("Progressing", message)
end

return assess(obj)
