"""Verifies one webhook delivery with the Standard Webhooks reference library.

Driven by tests/integration/webhooks.rs: argv[1] is the secret (`whsec_...`);
stdin is JSON {"headers": {"webhook-id": ..., "webhook-timestamp": ...,
"webhook-signature": ...}, "body": "<the request body as sent>"}. Prints the
verified CloudEvent's id and exits 0, or prints why and exits 1.
"""

import json
import sys

from standardwebhooks import Webhook


def main() -> int:
    request = json.load(sys.stdin)
    try:
        event = Webhook(sys.argv[1]).verify(request["body"], request["headers"])
    except Exception as e:  # the library raises WebhookVerificationError
        print(f"invalid: {e}")
        return 1
    print(event["id"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
