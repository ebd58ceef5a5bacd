-- Argo CD health check for RunPodPool (runpodpool.ownego.com), runpod-pool-controller.
-- Register it in the argocd-cm ConfigMap under the key
--   resource.customizations.health.runpodpool.ownego.com_RunPodPool
-- (docs/operating.md#gitops-health says how). It reads what the controller writes,
-- documented in docs/operating.md#ready and #reconciling-and-stalled:
--   Degraded     Stalled is True: the pool cannot reach its spec until a person acts
--   Progressing  no status yet, a spec the controller has not seen yet, or Reconciling
--                True (pods coming up, being replaced, a release, a deletion)
--   Healthy      Ready is True, and neither Reconciling nor Stalled is
-- A status written by a controller before 0.3.0 has no Reconciling or Stalled: Ready
-- alone decides there (Progressing while pods come up or the pool is deleted, Degraded
-- for any other reason it is False).
-- Argo CD runs it without the string and math libraries, so it uses neither.
local hs = {status = "Progressing", message = "waiting for the controller to report on the pool"}
if obj.status == nil then
  return hs
end
if (obj.status.observedGeneration or 0) < (obj.metadata.generation or 0) then
  hs.message = "the controller has not seen the latest spec yet"
  return hs
end
local found = {}
if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    found[condition.type] = condition
  end
end
local ready, reconciling, stalled = found["Ready"], found["Reconciling"], found["Stalled"]
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = stalled.message
  return hs
end
if reconciling ~= nil and reconciling.status == "True" then
  hs.message = reconciling.message
  return hs
end
if ready == nil then
  return hs
end
hs.message = ready.message
if ready.status == "True" then
  hs.status = "Healthy"
elseif reconciling == nil and ready.reason ~= "PodsNotReady" and ready.reason ~= "Deleting" then
  hs.status = "Degraded"
end
return hs
