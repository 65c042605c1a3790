# Dynamo's tool-call and reasoning parsers are Rust (the dynamo-parsers crate inside ai-dynamo-runtime) and run in
# its OpenAI frontend on a worker's token stream: no Python call parses a given text. So this repro needs Dynamo's
# frontend and a worker serving a model of the family with the parsers replay used:
#   python -m dynamo.frontend --http-port 8000 &
#   python -m dynamo.vllm --model MODEL --dyn-tool-call-parser "$TOOL_PARSER" --dyn-reasoning-parser "$REASONING_PARSER"
# (without --dyn-reasoning-parser where REASONING_PARSER is empty), and it shows the bug only when the model answers
# the request below with TEXT, token for token: put the served model's name and a prompt that makes it write that
# in the request (temperature 0 helps; nothing forces it). Streamed, a worker step is a delta, whatever chunking the
# replay used. Dynamo reads the thinking switch from chat_template_args.
BODY='{"model": "REPLACE with the served model name", "messages": [{"role": "user", "content": "REPLACE with a prompt your model answers with TEXT"}], "tools": '"$TOOLS"', "tool_choice": "auto", "temperature": 0, "chat_template_args": '"$CHAT_TEMPLATE_KWARGS"'}'
curl -s http://localhost:8000/v1/chat/completions -H 'Content-Type: application/json' -d "$BODY"
echo
curl -sN http://localhost:8000/v1/chat/completions -H 'Content-Type: application/json' -d "${BODY%\}}, \"stream\": true}"
