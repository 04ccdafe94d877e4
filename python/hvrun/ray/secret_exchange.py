"""Hands the job secret to a worker actor without it ever being a Ray argument or return value.

Everything given to a Ray actor or returned by it passes through Ray's object store and control
plane, and may land in Ray's logs; the job secret (which the coordinator demands of every call)
must not. So the actor and the driver agree on a one-time key by Diffie-Hellman over the 2048-bit
MODP group of RFC 3526 (Python's own big integers), and the driver sends the secret encrypted
with it: what Ray sees are the two public values and the ciphertext, from which the secret
cannot be read. (This protects against anyone reading Ray's logs or object store, not against
someone who can rewrite Ray's messages in flight: Ray's own transport security is for that.)
"""
import hashlib
import hmac
import secrets

# RFC 3526, section 3: the 2048-bit MODP group, generator 2.
_PRIME = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A0879"
    "8E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B"
    "0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA4836"
    "1C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804"
    "F1746C08CA18217C32905E462E36CE3BE39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6"
    "955817183995497CEA956AE515D2261898FA051015728E5A8AACAA68FFFFFFFFFFFFFFFF", 16)
_GENERATOR = 2


class KeyPair:
    """One side's private exponent and the public value it sends through Ray."""

    def __init__(self):
        self._private = secrets.randbelow(_PRIME - 3) + 2
        self.public = pow(_GENERATOR, self._private, _PRIME)

    def _key(self, peer_public):
        if not 1 < peer_public < _PRIME - 1:
            raise ValueError("the peer's public value is out of range")
        shared = pow(peer_public, self._private, _PRIME)
        master = hashlib.sha256(shared.to_bytes(256, "big")).digest()
        # One key for the keystream and another for the tag, so neither use can leak the other.
        return (hmac.new(master, b"hvrun job secret: keystream", hashlib.sha256).digest(),
                hmac.new(master, b"hvrun job secret: tag", hashlib.sha256).digest())

    def seal(self, peer_public, secret):
        """The secret (str) encrypted for the holder of `peer_public`: (nonce, ciphertext, tag)."""
        stream_key, tag_key = self._key(peer_public)
        nonce = secrets.token_bytes(16)
        plain = secret.encode()
        cipher = bytes(a ^ b for a, b in zip(plain, _keystream(stream_key, nonce, len(plain))))
        return nonce, cipher, hmac.new(tag_key, nonce + cipher, hashlib.sha256).digest()

    def open(self, peer_public, sealed):
        """The secret from `seal`'s answer; ValueError if it was not made for this key pair."""
        nonce, cipher, tag = sealed
        stream_key, tag_key = self._key(peer_public)
        if not hmac.compare_digest(tag, hmac.new(tag_key, nonce + cipher, hashlib.sha256).digest()):
            raise ValueError("the sealed job secret was not made for this worker's key")
        return bytes(a ^ b
                     for a, b in zip(cipher, _keystream(stream_key, nonce, len(cipher)))).decode()


def _keystream(key, nonce, length):
    blocks = []
    counter = 0
    while sum(map(len, blocks)) < length:
        blocks.append(hmac.new(key, b"stream" + nonce + counter.to_bytes(8, "big"),
                               hashlib.sha256).digest())
        counter += 1
    return b"".join(blocks)[:length]
