OPS=$(tnx spawn root ops)
tnx wake "$OPS" "deploy billing"
tnx wait "$OPS"                          # status pending: the Request and its id ($OPS#1)
tnx pending                              # the queue: handle, kind, prompt, Request id, age
tnx answer "$OPS" --approve              # or --decline; --data '{"otp": "123"}'
tnx wait "$OPS"                          # the continued turn's result
tnx close "$OPS"
