"""A Remote Execution API cache that misbehaves on purpose, for kcache's tests.

Run with the BuildGrid venv's Python (it has grpcio, and BuildGrid ships the
REAPI and ByteStream message classes and service stubs in buildgrid._protos):

    python3 hostile_reapi_server.py MODE PORT

It stores honestly (uploads go to an in-memory CAS and action cache) and lies
only when asked to read, in one way per MODE:

  honest               no lie: the baseline
  oversized-batch      BatchReadBlobs answers any blob with 200 MiB of zeros
  wrong-digest         BatchReadBlobs answers with the blob's bytes, one flipped
  endless-bytestream   batch limit 1 KiB (so blobs are streamed); ByteStream.Read
                       sends the blob, then zeros forever
  stalled-bytestream   batch limit 1 KiB; ByteStream.Read sends half the blob,
                       then nothing, forever
  oversized-chunk      batch limit 1 KiB; ByteStream.Read sends one 200 MiB chunk
  write-only           takes every upload, answers NOT_FOUND to every
                       GetActionResult
  silent               not gRPC: a TCP socket that accepts and never answers
  garbage              not gRPC: answers every connection with random bytes
  http1                not gRPC: an HTTP/1.1 server (400 to everything)

Prints "ready" on stdout once it listens on 127.0.0.1:PORT.
"""

import hashlib
import os
import socket
import sys
import threading
import time
from concurrent import futures

OVERSIZED_REPLY = 200 << 20
SMALL_BATCH_LIMIT = 1024


def serve_raw(port, mode):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    print("ready", flush=True)
    held = []  # silent: keep every connection open, unanswered
    while True:
        conn, _ = listener.accept()
        if mode == "silent":
            held.append(conn)
        elif mode == "garbage":
            try:
                conn.sendall(os.urandom(4096))
                time.sleep(0.2)
            except OSError:
                pass
            conn.close()
        elif mode == "http1":
            try:
                conn.recv(65536)
                body = b"not a gRPC server\n"
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" %
                             (len(body), body))
            except OSError:
                pass
            conn.close()


def serve_grpc(port, mode):
    import grpc
    from buildgrid._protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re
    from buildgrid._protos.build.bazel.remote.execution.v2 import remote_execution_pb2_grpc as re_grpc
    from buildgrid._protos.google.bytestream import bytestream_pb2 as bs
    from buildgrid._protos.google.bytestream import bytestream_pb2_grpc as bs_grpc
    from buildgrid._protos.google.rpc import code_pb2, status_pb2

    cas = {}  # sha256 hex -> bytes
    ac = {}   # action digest hex -> ActionResult bytes
    lock = threading.Lock()
    streamed = mode in ("endless-bytestream", "stalled-bytestream", "oversized-chunk")

    class Capabilities(re_grpc.CapabilitiesServicer):
        def GetCapabilities(self, request, context):
            caps = re.ServerCapabilities()
            caps.cache_capabilities.digest_functions.append(re.DigestFunction.SHA256)
            caps.cache_capabilities.action_cache_update_capabilities.update_enabled = True
            caps.cache_capabilities.max_batch_total_size_bytes = (
                SMALL_BATCH_LIMIT if streamed else 4 << 20)
            caps.low_api_version.major = 2
            caps.high_api_version.major = 2
            return caps

    class ActionCache(re_grpc.ActionCacheServicer):
        def GetActionResult(self, request, context):
            with lock:
                stored = ac.get(request.action_digest.hash)
            if stored is None or mode == "write-only":
                context.abort(grpc.StatusCode.NOT_FOUND, "no such action result")
            return re.ActionResult.FromString(stored)

        def UpdateActionResult(self, request, context):
            with lock:
                ac[request.action_digest.hash] = request.action_result.SerializeToString()
            return request.action_result

    class Cas(re_grpc.ContentAddressableStorageServicer):
        def FindMissingBlobs(self, request, context):
            reply = re.FindMissingBlobsResponse()
            with lock:
                for d in request.blob_digests:
                    if d.hash not in cas:
                        reply.missing_blob_digests.append(d)
            return reply

        def BatchUpdateBlobs(self, request, context):
            reply = re.BatchUpdateBlobsResponse()
            for r in request.requests:
                if hashlib.sha256(r.data).hexdigest() != r.digest.hash:
                    status = status_pb2.Status(code=code_pb2.INVALID_ARGUMENT, message="bad digest")
                else:
                    with lock:
                        cas[r.digest.hash] = r.data
                    status = status_pb2.Status(code=code_pb2.OK)
                reply.responses.append(
                    re.BatchUpdateBlobsResponse.Response(digest=r.digest, status=status))
            return reply

        def BatchReadBlobs(self, request, context):
            reply = re.BatchReadBlobsResponse()
            for d in request.digests:
                with lock:
                    data = cas.get(d.hash)
                r = reply.responses.add()
                r.digest.CopyFrom(d)
                if data is None:
                    r.status.code = code_pb2.NOT_FOUND
                    continue
                if mode == "oversized-batch":
                    data = bytes(OVERSIZED_REPLY)
                elif mode == "wrong-digest":
                    data = bytes([data[0] ^ 1]) + data[1:]
                r.data = data
            return reply

    class ByteStream(bs_grpc.ByteStreamServicer):
        def Read(self, request, context):
            # "[instance/]blobs/<hash>/<size>"
            parts = request.resource_name.split("/")
            with lock:
                data = cas.get(parts[-2])
            if data is None:
                context.abort(grpc.StatusCode.NOT_FOUND, "no such blob")
            if mode == "oversized-chunk":
                yield bs.ReadResponse(data=bytes(OVERSIZED_REPLY))
                return
            if mode == "stalled-bytestream":
                yield bs.ReadResponse(data=data[:len(data) // 2])
                while context.is_active():
                    time.sleep(0.1)
                return
            for i in range(0, len(data), 64 << 10):
                yield bs.ReadResponse(data=data[i:i + (64 << 10)])
            if mode == "endless-bytestream":
                zeros = bytes(64 << 10)
                while context.is_active():
                    yield bs.ReadResponse(data=zeros)

        def Write(self, request_iterator, context):
            name, chunks = None, []
            for r in request_iterator:
                if r.resource_name:
                    name = r.resource_name
                chunks.append(r.data)
            data = b"".join(chunks)
            # "[instance/]uploads/<uuid>/blobs/<hash>/<size>"
            digest = name.split("/")[-2] if name else ""
            if hashlib.sha256(data).hexdigest() != digest:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad digest")
            with lock:
                cas[digest] = data
            return bs.WriteResponse(committed_size=len(data))

        def QueryWriteStatus(self, request, context):
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "not needed")

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=32),
        options=[("grpc.max_receive_message_length", 512 << 20),
                 ("grpc.max_send_message_length", 512 << 20)])
    re_grpc.add_CapabilitiesServicer_to_server(Capabilities(), server)
    re_grpc.add_ActionCacheServicer_to_server(ActionCache(), server)
    re_grpc.add_ContentAddressableStorageServicer_to_server(Cas(), server)
    bs_grpc.add_ByteStreamServicer_to_server(ByteStream(), server)
    server.add_insecure_port("127.0.0.1:%d" % port)
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: hostile_reapi_server.py MODE PORT")
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode in ("silent", "garbage", "http1"):
        serve_raw(port, mode)
    elif mode in ("honest", "oversized-batch", "wrong-digest", "endless-bytestream",
                  "stalled-bytestream", "oversized-chunk", "write-only"):
        serve_grpc(port, mode)
    else:
        sys.exit("unknown mode %r" % mode)


if __name__ == "__main__":
    main()
