W=$(tnx spawn root worker)               # root/worker.1 (n counts a parent's spawns)
tnx post "$W" "new data" --from external --channel webhook
tnx wake "$W" "go on"; tnx wait "$W"
tnx wake "$W" "and again"
tnx wait "$W" --follow                   # the model's text and tool calls as they stream
tnx ls                                   # the tree: state, turns, tokens, pools, inbox
tnx ls --json
tnx inspect "$W" --transcript            # the transcript, read from the workers' store
tnx trace                                # the whole tree's lines, merged in order
tnx interrupt "$W"                       # stops a running turn; an idle handle stays idle
tnx close "$W" --reason "done"           # close what you start: [--force] stops a turn at once
