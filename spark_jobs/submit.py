"""The spark-submit entry point: ``spark-submit submit.py REQUEST RESPONSE``.

REQUEST holds one engine request (FlatBuffers, :mod:`odf_core.engine.protocol`); the answer is written to RESPONSE
atomically. Exit code 0 whenever a response was written (also for InvalidInput/InvalidQuery), 2 for a request file
that cannot be read, 1 when no response could be written.
"""
from __future__ import annotations

import os
import sys
import uuid
from typing import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: spark-submit submit.py REQUEST RESPONSE", file=sys.stderr)
        return 2
    from odf_core.engine.protocol import decode_request, encode_response

    try:
        with open(args[0], "rb") as f:
            request = decode_request(f.read())
    except Exception as e:  # noqa: BLE001
        print(f"cannot read the engine request {args[0]}: {e}", file=sys.stderr)
        return 2
    from spark_jobs.dispatch import handle
    from spark_jobs.session import create_session

    spark = create_session(f"odf-{type(request).__name__}")
    try:
        response = handle(spark, request)
    finally:
        spark.stop()
    tmp = f"{args[1]}.tmp-{uuid.uuid4().hex}"
    try:
        with open(tmp, "wb") as f:
            f.write(encode_response(response))
        os.replace(tmp, args[1])
    except OSError as e:
        print(f"cannot write the engine response {args[1]}: {e}", file=sys.stderr)
        return 1
    print(f"odf engine: {type(response).__name__}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    # spark-submit runs this file as a script, putting its folder first on sys.path: put the package's parent there
    # instead, so the modules of the package never shadow top-level ones and the package imports from its checkout.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
