-- Argo CD health check for ray.io RayCronJob (KubeRay, alpha RayCronJob feature gate).
-- Install as resource.customizations.health.ray.io_RayCronJob in argocd-cm;
-- argocd-cm-ray-health.yaml next to this file holds exactly this text.
--
-- Same verdicts and messages as gitops-ray (gitops_ray/health/ray.py); its tests run both
-- on the same objects. The controller writes only status.lastScheduleTime, when it creates
-- a RayJob: spec.suspend true is Suspended (no new RayJobs), anything else is Healthy (a
-- schedule that has not fired yet is not work in progress). The RayJobs it creates have
-- their own health.
--
-- Plain Lua 5.1 (Argo CD embeds gopher-lua) using only the base and table libraries.

local function text(value)
  if type(value) == "string" then return value end
  return ""
end

local function field(tbl, key)
  if type(tbl) == "table" then return tbl[key] end
  return nil
end

local function assess(obj)
  local spec = field(obj, "spec")
  if field(spec, "suspend") == true then
    return {status = "Suspended", message = "RayCronJob is suspended: no new RayJobs"}
  end
  local prefix = "RayCronJob on schedule '" .. text(field(spec, "schedule")) .. "': "
  local last = text(field(field(obj, "status"), "lastScheduleTime"))
  if last ~= "" then
    return {status = "Healthy", message = prefix .. "last RayJob created at " .. last}
  end
  return {status = "Healthy", message = prefix .. "no RayJob created yet"}
end

return assess(obj)
