"""botocore's own S3 Signature Version 4 signer (S3SigV4Auth) over the requests of a JSON file,
so the s3 plugin's signer can be compared with it field by field.

Input: a JSON list of {method, scheme, host, path (not encoded), query [[name, value]...],
headers [[name, value]...], payload_hash, access_key, secret_key, token, region, amz_date}.
Output (stdout): a JSON list of {encoded_path, canonical_request, string_to_sign, signature}.
The URL path is encoded the way botocore's serializer encodes an S3 key (percent_encode with
safe '/~'); the query is given to botocore as parameters, which it canonicalises itself.
"""
import json
import sys

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.utils import percent_encode


class FixedPayload(S3SigV4Auth):
    """The payload hash is the request's input (a file part's SHA-256, or UNSIGNED-PAYLOAD):
    what is compared is everything built around it."""

    def __init__(self, credentials, region, payload_hash):
        super().__init__(credentials, "s3", region)
        self._payload_hash = payload_hash

    def payload(self, request):
        return self._payload_hash


def sign(case):
    encoded_path = percent_encode(case["path"], safe="/~")
    request = AWSRequest(
        method=case["method"],
        url=f'{case["scheme"]}://{case["host"]}{encoded_path}',
        headers={name: value for name, value in case["headers"]},
        params={name: value for name, value in case["query"]},
    )
    request.context["timestamp"] = case["amz_date"]
    credentials = Credentials(case["access_key"], case["secret_key"], case.get("token"))
    auth = FixedPayload(credentials, case["region"], case["payload_hash"])
    auth._modify_request_before_signing(request)
    canonical = auth.canonical_request(request)
    to_sign = auth.string_to_sign(request, canonical)
    return {
        "encoded_path": encoded_path,
        "canonical_request": canonical,
        "string_to_sign": to_sign,
        "signature": auth.signature(to_sign, request),
    }


with open(sys.argv[1]) as f:
    cases = json.load(f)
json.dump([sign(case) for case in cases], sys.stdout)
