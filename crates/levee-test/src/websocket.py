# A WebSocket server for levee's tests, on Debian's python3-websockets (RFC 6455, an
# implementation levee shares nothing with). Serves 127.0.0.1:PORT until killed.
#
# Every text or binary message is echoed, except these text commands:
#   headers        -> the handshake's request headers and path, as JSON
#   close:CODE     -> the server closes with CODE
#   burst:N        -> N text messages "m0".."m{N-1}", then "done"
# A handshake for a path with "refuse" in it is answered 403 (a backend that says no).
import asyncio, http, json, sys
import websockets

async def handler(ws, path):
    async for msg in ws:
        if isinstance(msg, str) and msg == "headers":
            await ws.send(json.dumps({"path": path, "headers": dict(ws.request_headers.raw_items())}))
        elif isinstance(msg, str) and msg.startswith("close:"):
            await ws.close(code=int(msg[6:]), reason="asked")
            return
        elif isinstance(msg, str) and msg.startswith("burst:"):
            for i in range(int(msg[6:])):
                await ws.send("m%d" % i)
            await ws.send("done")
        else:
            await ws.send(msg)

async def refuse(path, headers):
    if "refuse" in path:
        return http.HTTPStatus.FORBIDDEN, [("Content-Type", "text/plain")], b"no websockets here\n"
    return None

async def main(port):
    async with websockets.serve(handler, "127.0.0.1", port, max_size=None,
                                process_request=refuse, ping_interval=None,
                                compression=None):
        await asyncio.Future()

asyncio.run(main(int(sys.argv[1])))
