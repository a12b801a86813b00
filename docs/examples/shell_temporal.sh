OPS=$(tnx spawn root ops)                # with no --scope, the workflow id is the handle id
temporal workflow signal --workflow-id "$OPS" --name wake --input '"deploy billing"'
tnx wait "$OPS"                          # parked on its approval
temporal workflow list --query 'AgentState="suspended" AND ExecutionStatus="Running"'  # the queue
temporal workflow describe --workflow-id "$OPS"   # AgentRequest* attributes, summary
temporal workflow metadata --workflow-id "$OPS"   # handler docs, current details (worker)
# a wrong id: the update returns the verdict {"ok": false, "error": ...}
temporal workflow update execute --workflow-id "$OPS" --name admit_answer \
    --input "{\"id\": \"$OPS#9\", \"ok\": true}"
# the approval: a signal needs no worker to be sent (it is taken when one polls)
temporal workflow signal --workflow-id "$OPS" --name answer \
    --input "{\"id\": \"$OPS#1\", \"ok\": true}"
tnx wait "$OPS"
temporal workflow signal --workflow-id "$OPS" --name post \
    --input '{"from": "external", "channel": "webhook", "text": "new data"}'
temporal workflow query --workflow-id "$OPS" --name view
temporal workflow list --query 'AgentState="idle" AND ExecutionStatus="Running"'  # a turn in flight too
tnx close "$OPS"
