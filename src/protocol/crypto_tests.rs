use super::*;

const PUBLIC: &[u8] = include_bytes!("../../tests/keys/app-public.pem");
const PRIVATE: &[u8] = include_bytes!("../../tests/keys/app-private.pem");
const PRIVATE_PKCS8: &[u8] = include_bytes!("../../tests/keys/app-private-pkcs8.pem");
const OTHER_PRIVATE: &[u8] = include_bytes!("../../tests/keys/other-private.pem");
const EC_PUBLIC: &[u8] = include_bytes!("../../tests/keys/ec-public.pem");

fn public_keys(name: &str) -> Result<KeyInfo, String> {
    match name {
        "app" => Ok(KeyInfo {
            key: PUBLIC.to_vec(),
            metadata: vec![("version".into(), "1".into())],
        }),
        _ => Err(format!("no key {name}")),
    }
}

fn private(bytes: &'static [u8]) -> impl FnMut(&str, &[(String, String)]) -> Result<KeyInfo, String> {
    move |_, _| {
        Ok(KeyInfo {
            key: bytes.to_vec(),
            metadata: Vec::new(),
        })
    }
}

fn sealed(payload: &[u8]) -> (MessageMetadata, Vec<u8>) {
    let enc = Encryptor::new(&["app".to_string()], Instant::now(), &mut public_keys).unwrap();
    let mut meta = MessageMetadata::default();
    let data = enc.seal(&mut meta, payload).unwrap();
    (meta, data)
}

#[test]
fn round_trip_with_pkcs1_and_pkcs8_private_keys_and_the_cache() {
    let (meta, data) = sealed(b"hello");
    assert_eq!(meta.encryption_keys.len(), 1);
    let k = &meta.encryption_keys[0];
    assert_eq!(k.key, "app");
    assert_eq!(k.value.len(), 256, "RSA-2048 ciphertext");
    assert_eq!(k.metadata[0].key, "version");
    assert_eq!(meta.encryption_param.as_ref().unwrap().len(), IV_LEN);
    assert_eq!(meta.encryption_algo, None);
    assert_eq!(data.len(), 5 + TAG_LEN);
    assert_ne!(&data[..5], b"hello");

    for key in [PRIVATE, PRIVATE_PKCS8] {
        let mut d = Decryptor::default();
        let mut calls = 0;
        let mut keys = |n: &str, m: &[(String, String)]| {
            calls += 1;
            assert_eq!(
                (n, m[0].1.as_str()),
                ("app", "1"),
                "the key's metadata reaches the reader"
            );
            private(key)(n, m)
        };
        assert_eq!(d.open(&meta, &data, Instant::now(), &mut keys).unwrap(), b"hello");
        assert_eq!(d.open(&meta, &data, Instant::now(), &mut keys).unwrap(), b"hello");
        assert_eq!(calls, 1, "the second message uses the cached data key");
        assert_eq!(d.cached(), 1);
    }
}

#[test]
fn every_entry_has_its_own_iv_under_one_data_key() {
    let enc = Encryptor::new(&["app".to_string()], Instant::now(), &mut public_keys).unwrap();
    let (mut a, mut b) = (MessageMetadata::default(), MessageMetadata::default());
    let (x, y) = (enc.seal(&mut a, b"same").unwrap(), enc.seal(&mut b, b"same").unwrap());
    assert_ne!(a.encryption_param, b.encryption_param);
    assert_ne!(x, y);
    assert_eq!(a.encryption_keys, b.encryption_keys);
}

#[test]
fn the_data_key_is_drawn_again_after_its_lifetime() {
    let start = Instant::now();
    let mut enc = Encryptor::new(&["app".to_string()], start, &mut public_keys).unwrap();
    let before = enc.keys().to_vec();
    assert!(!enc
        .rotate_if_due(start + Duration::from_secs(60), &mut public_keys)
        .unwrap());
    assert_eq!(enc.keys(), &before[..]);
    let later = start + DATA_KEY_LIFETIME;
    assert!(enc.rotate_if_due(later, &mut public_keys).unwrap());
    assert_ne!(enc.keys()[0].value, before[0].value);
    // A failed rotation keeps the current key in use.
    let mut failing = |_: &str| Err("store down".to_string());
    let current = enc.keys().to_vec();
    assert!(enc.rotate_if_due(later + DATA_KEY_LIFETIME, &mut failing).is_err());
    assert_eq!(enc.keys(), &current[..]);
}

#[test]
fn tampered_or_truncated_payloads_are_refused() {
    let (meta, data) = sealed(b"hello world");
    let mut d = Decryptor::default();
    let mut keys = private(PRIVATE);
    let mut bad = data.clone();
    bad[0] ^= 1;
    assert_eq!(
        d.open(&meta, &bad, Instant::now(), &mut keys),
        Err(CryptoError::Payload)
    );
    let mut bad_tag = data.clone();
    *bad_tag.last_mut().unwrap() ^= 1;
    assert_eq!(
        d.open(&meta, &bad_tag, Instant::now(), &mut keys),
        Err(CryptoError::Payload)
    );
    for cut in [0, 3, TAG_LEN, data.len() - 1] {
        assert_eq!(
            d.open(&meta, &data[..cut], Instant::now(), &mut keys),
            Err(CryptoError::Payload)
        );
    }
    assert_eq!(d.open(&meta, &data, Instant::now(), &mut keys).unwrap(), b"hello world");
}

#[test]
fn the_wrong_private_key_or_a_missing_one_is_an_error() {
    let (meta, data) = sealed(b"secret");
    let mut d = Decryptor::default();
    let err = d
        .open(&meta, &data, Instant::now(), &mut private(OTHER_PRIVATE))
        .unwrap_err();
    assert!(
        matches!(err, CryptoError::NoDataKey(ref s) if s.contains("app")),
        "{err}"
    );
    let mut missing = |n: &str, _: &[(String, String)]| Err(format!("no file for {n}"));
    let err = d.open(&meta, &data, Instant::now(), &mut missing).unwrap_err();
    assert!(matches!(err, CryptoError::KeyUnavailable { .. }), "{err}");
    assert_eq!(d.cached(), 0);
}

#[test]
fn malformed_keys_are_errors() {
    for bytes in [
        &b""[..],
        b"not a key",
        b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
        b"-----BEGIN RSA PUBLIC KEY-----\n!!\n-----END RSA PUBLIC KEY-----\n",
        &[0x30, 0x82, 0xff, 0xff, 0x00],
        PRIVATE,
        EC_PUBLIC,
    ] {
        let e = parse_public_key("k", bytes).unwrap_err();
        assert!(matches!(e, CryptoError::BadKey { kind: "public", .. }), "{e}");
    }
    for bytes in [
        &b""[..],
        b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        PUBLIC,
    ] {
        let e = parse_private_key("k", bytes).unwrap_err();
        assert!(matches!(e, CryptoError::BadKey { kind: "private", .. }), "{e}");
    }
    let mut bad = |_: &str| {
        Ok(KeyInfo {
            key: b"garbage".to_vec(),
            metadata: Vec::new(),
        })
    };
    let err = Encryptor::new(&["app".to_string()], Instant::now(), &mut bad).unwrap_err();
    assert!(matches!(err, CryptoError::BadKey { .. }), "{err}");
    let err = Encryptor::new(&["nope".to_string()], Instant::now(), &mut public_keys).unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
}

#[test]
fn malformed_encryption_metadata_from_the_wire_is_an_error_not_a_panic() {
    let (meta, data) = sealed(b"x");
    let mut keys = private(PRIVATE);
    let now = Instant::now();
    let mut d = Decryptor::default();
    let mut m = meta.clone();
    m.encryption_param = None;
    assert!(matches!(
        d.open(&m, &data, now, &mut keys),
        Err(CryptoError::Metadata(_))
    ));
    for iv in [vec![], vec![0u8; 11], vec![0u8; 13], vec![0u8; 4096]] {
        m.encryption_param = Some(iv.into());
        assert!(matches!(
            d.open(&m, &data, now, &mut keys),
            Err(CryptoError::Metadata(_))
        ));
    }
    let mut m = meta.clone();
    m.encryption_keys.clear();
    assert!(matches!(
        d.open(&m, &data, now, &mut keys),
        Err(CryptoError::Metadata(_))
    ));
    // Wrapped keys of every wrong length, and a right-length one that is not OAEP.
    for value in [
        vec![],
        vec![1u8],
        vec![0u8; 255],
        vec![7u8; 256],
        vec![0xffu8; 256],
        vec![0u8; 257],
        vec![0u8; 100_000],
    ] {
        let mut m = meta.clone();
        m.encryption_keys[0].value = value.into();
        assert!(matches!(
            d.open(&m, &data, now, &mut keys),
            Err(CryptoError::NoDataKey(_))
        ));
    }
    assert_eq!(d.cached(), 0);
    // Thousands of keys: only the first MAX_KEYS_TRIED are looked up.
    let mut m = meta.clone();
    let mut bogus = m.encryption_keys[0].clone();
    bogus.value = vec![1u8; 256].into();
    m.encryption_keys = vec![bogus; 5000];
    let mut lookups = 0;
    let mut counting = |n: &str, md: &[(String, String)]| {
        lookups += 1;
        private(PRIVATE)(n, md)
    };
    assert!(matches!(
        d.open(&m, &data, now, &mut counting),
        Err(CryptoError::NoDataKey(_))
    ));
    assert_eq!(lookups, MAX_KEYS_TRIED);
}
