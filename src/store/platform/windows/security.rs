//! Files private to the user who runs the host, on Windows: what the store
//! creates carries a protected DACL granting this user alone, with this
//! user as owner (the counterpart of modes 0600 / 0700), and what the
//! SQLite path rules check of a database and its directory is its owner
//! and the entries of its DACL (the counterpart of the owner uid and the
//! group / other bits).

use std::fs::OpenOptions;
use std::io;
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::AsRawHandle;
use std::path::Path;
use std::sync::OnceLock;

use windows_sys::Win32::Foundation::{
    CloseHandle, LocalFree, GENERIC_ALL, GENERIC_READ, GENERIC_WRITE, HANDLE,
};
use windows_sys::Win32::Security::Authorization::{
    ConvertSidToStringSidW, ConvertStringSecurityDescriptorToSecurityDescriptorW, GetSecurityInfo,
    SDDL_REVISION_1, SE_FILE_OBJECT,
};
use windows_sys::Win32::Security::{
    AclSizeInformation, EqualSid, GetAce, GetAclInformation, GetLengthSid, GetTokenInformation,
    IsWellKnownSid, TokenOwner, TokenUser, WinBuiltinAdministratorsSid, WinLocalSystemSid,
    ACCESS_ALLOWED_ACE, ACL, ACL_SIZE_INFORMATION, DACL_SECURITY_INFORMATION, INHERIT_ONLY_ACE,
    OWNER_SECURITY_INFORMATION, PSECURITY_DESCRIPTOR, PSID, SECURITY_ATTRIBUTES, TOKEN_OWNER,
    TOKEN_QUERY, TOKEN_USER,
};
use windows_sys::Win32::Storage::FileSystem::{
    DELETE, FILE_APPEND_DATA, FILE_DELETE_CHILD, FILE_FLAG_BACKUP_SEMANTICS,
    FILE_FLAG_OPEN_REPARSE_POINT, FILE_READ_ATTRIBUTES, FILE_READ_DATA, FILE_WRITE_DATA,
    READ_CONTROL, WRITE_DAC, WRITE_OWNER,
};
use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

use super::{check, SHARE_ALL};

/// `ACCESS_ALLOWED_ACE_TYPE` and `ACCESS_ALLOWED_CALLBACK_ACE_TYPE`
/// (winnt.h): the entries that grant, laid out as `ACCESS_ALLOWED_ACE`.
const ALLOWED_TYPES: [u8; 2] = [0, 9];

/// What another account may not hold on the database's directory: making,
/// removing or renaming entries in it, or changing who may.
const DIRECTORY_WRITE: u32 = FILE_WRITE_DATA // FILE_ADD_FILE
    | FILE_APPEND_DATA // FILE_ADD_SUBDIRECTORY
    | FILE_DELETE_CHILD
    | DELETE
    | WRITE_DAC
    | WRITE_OWNER
    | GENERIC_WRITE
    | GENERIC_ALL;

/// What another account may not hold on the database: reading or
/// writing it, or changing who may.
const FILE_USE: u32 = FILE_READ_DATA
    | FILE_WRITE_DATA
    | FILE_APPEND_DATA
    | DELETE
    | WRITE_DAC
    | WRITE_OWNER
    | GENERIC_READ
    | GENERIC_WRITE
    | GENERIC_ALL;

/// This process's user and default owner, as SID bytes, and the user's
/// SID as text.
struct Me {
    user: Vec<u8>,
    owner: Vec<u8>,
    user_text: String,
}

/// A SID's bytes copied out of the buffer that holds it.
///
/// # Safety
/// `sid` points to a valid SID.
unsafe fn sid_bytes(sid: PSID) -> Vec<u8> {
    // SAFETY: the caller's promise; GetLengthSid reads only the SID.
    let len = unsafe { GetLengthSid(sid) } as usize;
    // SAFETY: a valid SID is `len` readable bytes.
    unsafe { std::slice::from_raw_parts(sid.cast::<u8>(), len) }.to_vec()
}

/// A SID as text (`S-1-5-21-…`).
///
/// # Safety
/// `sid` points to a valid SID.
unsafe fn sid_text(sid: PSID) -> String {
    let mut text = std::ptr::null_mut();
    // SAFETY: the caller's promise for `sid`; `text` receives a LocalAlloc'd
    // NUL-terminated string, freed below.
    if unsafe { ConvertSidToStringSidW(sid, &mut text) } == 0 || text.is_null() {
        return "an unknown account".to_string();
    }
    // SAFETY: `text` is NUL-terminated (ConvertSidToStringSidW's promise).
    let len = (0..).take_while(|&i| unsafe { *text.add(i) } != 0).count();
    // SAFETY: `len` u16s are readable before the NUL.
    let out = String::from_utf16_lossy(unsafe { std::slice::from_raw_parts(text, len) });
    // SAFETY: `text` came from LocalAlloc and is freed once.
    unsafe { LocalFree(text.cast()) };
    out
}

/// One `GetTokenInformation` class of this process's token, in a buffer
/// aligned for the structure it holds.
fn token_info(token: HANDLE, class: i32) -> io::Result<Vec<u64>> {
    let mut len = 0u32;
    // SAFETY: a size query: no buffer, `len` receives the size needed.
    unsafe { GetTokenInformation(token, class, std::ptr::null_mut(), 0, &mut len) };
    let mut buf = vec![0u64; (len as usize).div_ceil(8).max(1)];
    // SAFETY: `buf` holds at least `len` writable bytes.
    check(unsafe { GetTokenInformation(token, class, buf.as_mut_ptr().cast(), len, &mut len) })?;
    Ok(buf)
}

fn me_now() -> io::Result<Me> {
    let mut token: HANDLE = std::ptr::null_mut();
    // SAFETY: GetCurrentProcess returns a pseudo handle; `token` receives
    // a handle closed below.
    check(unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) })?;
    let user = token_info(token, TokenUser);
    let owner = token_info(token, TokenOwner);
    // SAFETY: `token` is open and closed once.
    unsafe { CloseHandle(token) };
    let (user, owner) = (user?, owner?);
    // SAFETY: the buffers hold a TOKEN_USER and a TOKEN_OWNER as the
    // calls wrote them, whose SIDs point into the same buffers.
    unsafe {
        let user_sid = (*user.as_ptr().cast::<TOKEN_USER>()).User.Sid;
        let owner_sid = (*owner.as_ptr().cast::<TOKEN_OWNER>()).Owner;
        Ok(Me {
            user: sid_bytes(user_sid),
            owner: sid_bytes(owner_sid),
            user_text: sid_text(user_sid),
        })
    }
}

/// This process's accounts, read once.
fn me() -> io::Result<&'static Me> {
    static ME: OnceLock<Result<Me, i32>> = OnceLock::new();
    ME.get_or_init(|| me_now().map_err(|e| e.raw_os_error().unwrap_or(0)))
        .as_ref()
        .map_err(|code| io::Error::from_raw_os_error(*code))
}

/// A security descriptor for something new that only this user may use:
/// owner this user, and a protected DACL (nothing inherited) with one
/// entry, full access for this user, inherited by what is made inside.
pub struct PrivateDescriptor {
    attributes: SECURITY_ATTRIBUTES,
}

impl PrivateDescriptor {
    /// `O:<user>D:P(A;OICI;FA;;;<user>)`.
    pub fn new() -> io::Result<PrivateDescriptor> {
        let user = &me()?.user_text;
        PrivateDescriptor::from_sddl(&format!("O:{user}D:P(A;OICI;FA;;;{user})"))
    }

    /// The descriptor the SDDL text `sddl` describes.
    fn from_sddl(sddl: &str) -> io::Result<PrivateDescriptor> {
        let sddl: Vec<u16> = sddl.encode_utf16().chain(Some(0)).collect();
        let mut sd: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
        // SAFETY: `sddl` is NUL-terminated; `sd` receives a LocalAlloc'd
        // descriptor that Drop frees.
        check(unsafe {
            ConvertStringSecurityDescriptorToSecurityDescriptorW(
                sddl.as_ptr(),
                SDDL_REVISION_1,
                &mut sd,
                std::ptr::null_mut(),
            )
        })?;
        Ok(PrivateDescriptor {
            attributes: SECURITY_ATTRIBUTES {
                nLength: std::mem::size_of::<SECURITY_ATTRIBUTES>() as u32,
                lpSecurityDescriptor: sd,
                bInheritHandle: 0,
            },
        })
    }

    /// The `SECURITY_ATTRIBUTES` to create with (valid while `self` is).
    pub fn attributes(&self) -> *const SECURITY_ATTRIBUTES {
        &self.attributes
    }
}

impl Drop for PrivateDescriptor {
    fn drop(&mut self) {
        // SAFETY: the descriptor came from LocalAlloc and is freed once.
        unsafe { LocalFree(self.attributes.lpSecurityDescriptor) };
    }
}

/// Tests: create the file (or directory) `path` with the security
/// descriptor the SDDL text `sddl` describes.
#[cfg(test)]
pub fn create_with_sddl(path: &Path, sddl: &str, directory: bool) -> io::Result<()> {
    use windows_sys::Win32::Storage::FileSystem::{CreateDirectoryW, CreateFileW, CREATE_NEW};
    let sd = PrivateDescriptor::from_sddl(sddl)?;
    let name = super::wide(path);
    if directory {
        // SAFETY: `name` is NUL-terminated; the descriptor lives for the call.
        return check(unsafe { CreateDirectoryW(name.as_ptr(), sd.attributes()) });
    }
    // SAFETY: as above; the handle returned is closed at once.
    let handle = unsafe {
        CreateFileW(
            name.as_ptr(),
            GENERIC_WRITE,
            SHARE_ALL,
            sd.attributes(),
            CREATE_NEW,
            0,
            std::ptr::null_mut(),
        )
    };
    if handle == windows_sys::Win32::Foundation::INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a valid handle, closed once.
    unsafe { CloseHandle(handle) };
    Ok(())
}

/// Why the entry at `path` is not this user's alone, or `None` when it
/// is: its owner must be this user (or this process's default owner), and
/// no entry of its DACL may grant another account than those, SYSTEM and
/// the Administrators what [`DIRECTORY_WRITE`] (a directory) or
/// [`FILE_USE`] (a file) names. Entries that only pass on to what is made
/// inside (`INHERIT_ONLY_ACE`) and denials are not grants.
pub fn check_private(path: &Path, directory: bool) -> io::Result<Option<String>> {
    let me = me()?;
    let file = OpenOptions::new()
        .access_mode(READ_CONTROL | FILE_READ_ATTRIBUTES)
        .share_mode(SHARE_ALL)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)?;
    let (mut owner, mut dacl, mut sd): (PSID, *mut ACL, PSECURITY_DESCRIPTOR) = (
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    // SAFETY: the handle is open (borrowed from `file`); the out pointers
    // receive pointers into `sd`, a LocalAlloc'd block freed below.
    let rc = unsafe {
        GetSecurityInfo(
            file.as_raw_handle() as HANDLE,
            SE_FILE_OBJECT,
            OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
            &mut owner,
            std::ptr::null_mut(),
            &mut dacl,
            std::ptr::null_mut(),
            &mut sd,
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc as i32));
    }
    // SAFETY: `owner` and `dacl` point into `sd`, alive until it is freed.
    let fault = unsafe { judge(me, owner, dacl, directory) };
    // SAFETY: `sd` came from LocalAlloc and is freed once.
    unsafe { LocalFree(sd) };
    Ok(fault)
}

/// # Safety
/// `owner` is a valid SID or null; `dacl` a valid ACL or null.
unsafe fn judge(me: &Me, owner: PSID, dacl: *mut ACL, directory: bool) -> Option<String> {
    let user = me.user.as_ptr() as PSID;
    let default_owner = me.owner.as_ptr() as PSID;
    // SAFETY (all EqualSid / IsWellKnownSid calls): the SIDs are valid.
    let mine = |sid: PSID| unsafe { EqualSid(sid, user) != 0 || EqualSid(sid, default_owner) != 0 };
    let trusted = |sid: PSID| {
        mine(sid)
            || unsafe {
                IsWellKnownSid(sid, WinLocalSystemSid) != 0
                    || IsWellKnownSid(sid, WinBuiltinAdministratorsSid) != 0
            }
    };
    if owner.is_null() || !mine(owner) {
        let who = if owner.is_null() {
            "no account".to_string()
        } else {
            // SAFETY: `owner` is a valid SID.
            unsafe { sid_text(owner) }
        };
        return Some(format!(
            "is owned by {who}, not by this user ({})",
            me.user_text
        ));
    }
    if dacl.is_null() {
        return Some("has no DACL, so every account may use it".to_string());
    }
    let mut size: ACL_SIZE_INFORMATION = Default::default();
    // SAFETY: `dacl` is a valid ACL; `size` is the structure of the class.
    let sized = unsafe {
        GetAclInformation(
            dacl,
            (&mut size as *mut ACL_SIZE_INFORMATION).cast(),
            std::mem::size_of::<ACL_SIZE_INFORMATION>() as u32,
            AclSizeInformation,
        )
    };
    if sized == 0 {
        return Some("has a DACL that cannot be read".to_string());
    }
    let forbidden = if directory { DIRECTORY_WRITE } else { FILE_USE };
    for i in 0..size.AceCount {
        let mut ace = std::ptr::null_mut();
        // SAFETY: `i` is below the ACL's entry count.
        if unsafe { GetAce(dacl, i, &mut ace) } == 0 {
            return Some("has a DACL that cannot be read".to_string());
        }
        // SAFETY: every ACE starts with an ACE_HEADER; the allowed types
        // are laid out as ACCESS_ALLOWED_ACE, the SID at SidStart.
        let ace = unsafe { &*ace.cast::<ACCESS_ALLOWED_ACE>() };
        if !ALLOWED_TYPES.contains(&ace.Header.AceType)
            || u32::from(ace.Header.AceFlags) & INHERIT_ONLY_ACE != 0
        {
            continue;
        }
        let sid = (&ace.SidStart as *const u32).cast_mut().cast();
        if ace.Mask & forbidden != 0 && !trusted(sid) {
            // SAFETY: `sid` is the entry's valid SID.
            let who = unsafe { sid_text(sid) };
            let what = if directory { "write" } else { "use" };
            return Some(format!(
                "lets {who} {what} it (access mask {:#x})",
                ace.Mask
            ));
        }
    }
    None
}
