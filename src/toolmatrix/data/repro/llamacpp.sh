# llama.cpp has no Python parser: llama-server parses the model's answer with the PEG parser it derives from the
# chat template, and no route parses a given text (/completion returns raw text, unparsed). So this repro needs
# llama-server and a model of the family, started with the template replay used (llama.cpp's models/templates/, or
# toolmatrix's engines/templates/ for a family whose registered model brings its own):
#   llama-server -m MODEL.gguf --jinja --chat-template-file "models/templates/$TOOL_PARSER"
# and it shows the bug only when the model answers the request below with TEXT, token for token: replace the
# prompt with one that makes your model write it (temperature 0 helps; nothing forces it). Streamed, the server
# sends a delta per token, whatever chunking the replay used.
BODY='{"messages": [{"role": "user", "content": "REPLACE with a prompt your model answers with TEXT"}], "tools": '"$TOOLS"', "tool_choice": "auto", "temperature": 0, "chat_template_kwargs": '"$CHAT_TEMPLATE_KWARGS"'}'
curl -s http://localhost:8080/v1/chat/completions -H 'Content-Type: application/json' -d "$BODY"
echo
curl -sN http://localhost:8080/v1/chat/completions -H 'Content-Type: application/json' -d "${BODY%\}}, \"stream\": true}"
